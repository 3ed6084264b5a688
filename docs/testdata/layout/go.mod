module example.com/layout

go 1.26

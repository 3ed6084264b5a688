package main

import _ "example.com/layout/app/wiring"

func main() {}

package template

import (
	"strconv"
	"strings"
	"testing"
)

func TestReferencesListTheLiteralPathsATemplateReads(t *testing.T) {
	cases := []struct {
		src  string
		want string // refs as path@line:col, space-separated
	}{
		{"plain text", ""},
		{"{{ input.name }}", "input.name@1:4"},
		{"hi {{ build.output.version | upper }}\n{{ input['region'] }}", "build.output.version@1:7 input.region@2:4"},
		{"{{ input[key].x }}", "input@1:4 key@1:10"},
		{"{% if input.deploy %}{{ say_hello.output.greeting }}{% endif %}", "input.deploy@1:7 say_hello.output.greeting@1:25"},
		{"{{ each.item.name ~ secret.TOKEN }}", "each.item.name@1:4 secret.TOKEN@1:21"},
		{"{{ items[0] }}", "items.0@1:4"},
		// Guarded paths are the author's way of coping with a missing value.
		{"{{ input.x | default('none') }}", ""},
		{"{% if input.x is defined %}{{ input.x.y }}{% endif %}{{ input.z }}", "input.z@1:57"},
		// A template with locals of its own is not checked.
		{"{% for s in input.list %}{{ s.name }}{% endfor %}", ""},
		{"{% set a = 1 %}{{ a }}", ""},
	}
	for _, c := range cases {
		refs, err := References(c.src)
		if err != nil {
			t.Fatalf("%q: %v", c.src, err)
		}
		var got []string
		for _, r := range refs {
			got = append(got, r.String()+"@"+strconv.Itoa(r.Line)+":"+strconv.Itoa(r.Col))
		}
		if g := strings.Join(got, " "); g != c.want {
			t.Errorf("%q:\ngot  %s\nwant %s", c.src, g, c.want)
		}
	}
}

package quote

import "testing"

func TestInputEnvNames(t *testing.T) {
	for in, want := range map[string]string{
		"name":       "INPUT_NAME",
		"my-key":     "INPUT_MY_KEY",
		"a.b c":      "INPUT_A_B_C",
		"Mixed9Case": "INPUT_MIXED9CASE",
	} {
		if got := InputEnvName(in); got != want {
			t.Errorf("InputEnvName(%q) = %q, want %q", in, got, want)
		}
	}
}

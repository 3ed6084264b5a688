package app

import "testing"

func TestRunnerKindsDeclareTheirTags(t *testing.T) {
	want := map[string]string{"local": "", "docker": "docker", "pod": "kubernetes"}
	for _, k := range runnerTags.Kinds() {
		if w, ok := want[k.Name]; !ok || w != k.Tag || k.Detect == nil {
			t.Errorf("kind %+v unexpected", k)
		}
		if runnerTags.CapabilityTag(k.Name) != k.Tag {
			t.Errorf("CapabilityTag(%s) = %q", k.Name, runnerTags.CapabilityTag(k.Name))
		}
	}
	if len(runnerTags.Kinds()) != len(want) || runnerTags.CapabilityTag("nope") != "" {
		t.Errorf("kinds = %v", runnerTags.Kinds())
	}
}

package runners

import (
	"strings"
	"testing"
)

func TestMergeTagsKeepsOrderWithoutDuplicates(t *testing.T) {
	got := MergeTags([]string{"gpu", "docker"}, []string{"docker", "kubernetes"})
	if strings.Join(got, ",") != "gpu,docker,kubernetes" {
		t.Errorf("MergeTags = %v", got)
	}
}

package pod

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// mergeManifest deep-merges an action's manifest (a Pod object: metadata,
// spec) over the generated pod: maps merge key by key; lists whose items
// all carry a `name` (containers, env, volumes, volumeMounts, ports) merge
// item by item on it, new names appended; other lists (tolerations,
// imagePullSecrets, args) are appended to; scalars replace. The result is
// decoded strictly (an unknown field is an error) and checked.
func mergeManifest(pod *corev1.Pod, manifest map[string]any) (*corev1.Pod, error) {
	if len(manifest) == 0 {
		return pod, checkPod(pod)
	}
	raw, err := json.Marshal(pod)
	if err != nil {
		return nil, fmt.Errorf("encode pod: %w", err)
	}
	var base map[string]any
	if err := json.Unmarshal(raw, &base); err != nil {
		return nil, fmt.Errorf("encode pod: %w", err)
	}
	over, err := normalJSON(manifest)
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	if err := checkManifest(over); err != nil {
		return nil, err
	}
	merged := mergeValue(base, over)
	raw, err = json.Marshal(merged)
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var out corev1.Pod
	if err := dec.Decode(&out); err != nil {
		return nil, fmt.Errorf("manifest does not make a valid pod: %v", err)
	}
	if err := checkPod(&out); err != nil {
		return nil, err
	}
	return &out, nil
}

// checkManifest refuses a manifest that changes what the runner controls:
// where the pod lives and how it is known (metadata.name, namespace, the
// appliance.* labels and annotations: a pod in another namespace, or one
// labelled for another worker or step, escapes the runner's clean-up and
// its cancel, or is deleted as another's leftover), and the init
// container, which holds the step's workspace token. What a pod may do on
// its node (hostPID, privileged, ...) is the namespace's Pod Security
// admission to decide, as for any pod created there.
func checkManifest(over map[string]any) error {
	var errs []string
	if meta, ok := over["metadata"].(map[string]any); ok {
		for _, k := range []string{"name", "generateName", "namespace"} {
			if _, ok := meta[k]; ok {
				errs = append(errs, fmt.Sprintf("metadata.%s: set by the runner", k))
			}
		}
		for _, field := range []string{"labels", "annotations"} {
			m, _ := meta[field].(map[string]any)
			for k := range m {
				if strings.HasPrefix(k, "appliance.") {
					errs = append(errs, fmt.Sprintf("metadata.%s.%s: set by the runner", field, k))
				}
			}
		}
	}
	if spec, ok := over["spec"].(map[string]any); ok {
		list, _ := spec["initContainers"].([]any)
		for _, c := range list {
			if m, ok := c.(map[string]any); ok && m["name"] == podInitContainer {
				errs = append(errs, fmt.Sprintf("spec.initContainers[%s]: the runner's own init container cannot be changed", podInitContainer))
			}
		}
	}
	if len(errs) > 0 {
		sort.Strings(errs)
		return fmt.Errorf("manifest: %s", strings.Join(errs, "; "))
	}
	return nil
}

// normalJSON turns a YAML-decoded value into plain JSON types.
func normalJSON(v map[string]any) (map[string]any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	return out, json.Unmarshal(raw, &out)
}

func mergeValue(base, over any) any {
	switch o := over.(type) {
	case map[string]any:
		b, ok := base.(map[string]any)
		if !ok {
			return o
		}
		for k, v := range o {
			if old, ok := b[k]; ok {
				b[k] = mergeValue(old, v)
			} else {
				b[k] = v
			}
		}
		return b
	case []any:
		b, ok := base.([]any)
		if !ok {
			return o
		}
		if named(b) && named(o) {
			return mergeNamed(b, o)
		}
		return append(b, o...)
	}
	return over
}

// named reports whether every item of list is an object with a name.
func named(list []any) bool {
	for _, v := range list {
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		if _, ok := m["name"].(string); !ok {
			return false
		}
	}
	return true
}

func mergeNamed(base, over []any) []any {
	at := map[string]int{}
	for i, v := range base {
		at[v.(map[string]any)["name"].(string)] = i
	}
	for _, v := range over {
		name := v.(map[string]any)["name"].(string)
		if i, ok := at[name]; ok {
			base[i] = mergeValue(base[i], v)
		} else {
			at[name] = len(base)
			base = append(base, v)
		}
	}
	return base
}

// checkPod refuses a pod Kubernetes would refuse, or one the runner could
// not follow, with a message naming the field.
func checkPod(pod *corev1.Pod) error {
	var errs []string
	bad := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }
	if pod.Kind != "" && pod.Kind != "Pod" {
		bad("kind: must be Pod, got %q", pod.Kind)
	}
	if pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
		bad("spec.restartPolicy: must be Never (a step runs once), got %q", pod.Spec.RestartPolicy)
	}
	for k, v := range pod.Labels {
		for _, msg := range validation.IsQualifiedName(k) {
			bad("metadata.labels: key %q: %s", k, msg)
		}
		for _, msg := range validation.IsValidLabelValue(v) {
			bad("metadata.labels.%s: %s", k, msg)
		}
	}
	seen := map[string]bool{}
	hasStep := false
	check := func(field string, cs []corev1.Container) {
		for i, c := range cs {
			where := fmt.Sprintf("spec.%s[%d]", field, i)
			if c.Name != "" {
				where = fmt.Sprintf("spec.%s[%s]", field, c.Name)
			}
			for _, msg := range validation.IsDNS1123Label(c.Name) {
				bad("%s.name %q: %s", where, c.Name, msg)
			}
			if seen[c.Name] {
				bad("%s.name: duplicate container name %q", where, c.Name)
			}
			seen[c.Name] = true
			if strings.TrimSpace(c.Image) == "" {
				bad("%s.image: required", where)
			}
			if field == "containers" && c.Name == podStepContainer {
				hasStep = true
			}
		}
	}
	check("initContainers", pod.Spec.InitContainers)
	check("containers", pod.Spec.Containers)
	if !hasStep {
		bad("spec.containers: the step's container %q is missing", podStepContainer)
	}
	vols := map[string]bool{}
	for _, v := range pod.Spec.Volumes {
		vols[v.Name] = true
	}
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			for _, m := range c.VolumeMounts {
				if !vols[m.Name] {
					bad("spec.containers[%s].volumeMounts: no volume named %q in spec.volumes", c.Name, m.Name)
				}
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid pod after merging the manifest: %s", strings.Join(errs, "; "))
	}
	return nil
}

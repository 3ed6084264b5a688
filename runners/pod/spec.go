package pod

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/appliance-sh/appliance/engine/workflow"
	"github.com/appliance-sh/appliance/runners"
)

// Names inside a step's pod.
const (
	podStepContainer = "step"
	podInitContainer = "appliance-init"
	podFilesVolume   = "appliance-files"
	podWorkVolume    = "workspace"
	// LabelWorker names the worker that created a pod, so the worker can
	// find its leftovers at start-up.
	LabelWorker = "appliance.worker"
)

// podParams are what a pod needs beyond the step: its name, and for a
// script pod where its init container fetches the workspace from.
type podParams struct {
	Name      string
	Namespace string
	Worker    string
	ServerURL string
	Revision  string
	Token     string // step-bound workspace token; scripts only
}

// buildPod generates a step's pod before its manifest is merged: the
// step's container (the action's image, or its language's image for a
// script), its environment, resources and labels, and an init container
// writing the input file (and the inline script) and, for a script,
// fetching the workspace into an emptyDir.
func (p *Runner) buildPod(step *runners.Step, pp podParams) (*corev1.Pod, error) {
	a := step.Action
	if a == nil {
		return nil, fmt.Errorf("step %q has no action", step.Name)
	}
	inputJSON, env, err := runners.ContainerEnv(step)
	if err != nil {
		return nil, err
	}
	main := corev1.Container{
		Name:                     podStepContainer,
		Env:                      envVars(env),
		VolumeMounts:             []corev1.VolumeMount{{Name: podFilesVolume, MountPath: runners.ContainerFilesDir, ReadOnly: true}},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
	if main.Resources, err = podResources(a.Resources); err != nil {
		return nil, err
	}
	initEnv := []string{
		"APPLIANCE_FILES_DIR=" + runners.ContainerFilesDir,
		"APPLIANCE_INPUT_JSON=" + string(inputJSON),
	}
	volumes := []corev1.Volume{{Name: podFilesVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	initMounts := []corev1.VolumeMount{{Name: podFilesVolume, MountPath: runners.ContainerFilesDir}}

	switch a.Type {
	case workflow.TypePod, workflow.TypeDocker:
		if err := podImageAction(&main, a); err != nil {
			return nil, err
		}
	case workflow.TypeScript, "":
		script, err := p.podScript(&main, a)
		if err != nil {
			return nil, err
		}
		if script.inline {
			initEnv = append(initEnv, "APPLIANCE_SCRIPT_FILE="+script.file, "APPLIANCE_SCRIPT="+a.Script)
		}
		initEnv = append(initEnv,
			"APPLIANCE_SERVER_URL="+pp.ServerURL,
			"APPLIANCE_WORKSPACE_TOKEN="+pp.Token,
			"APPLIANCE_WORKSPACE="+step.Workspace,
			"APPLIANCE_REVISION="+pp.Revision,
			"APPLIANCE_WORKSPACE_DIR="+runners.ContainerWorkDir,
		)
		volumes = append(volumes, corev1.Volume{Name: podWorkVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		initMounts = append(initMounts, corev1.VolumeMount{Name: podWorkVolume, MountPath: runners.ContainerWorkDir})
		main.VolumeMounts = append(main.VolumeMounts, corev1.VolumeMount{Name: podWorkVolume, MountPath: runners.ContainerWorkDir, ReadOnly: true})
	default:
		return nil, fmt.Errorf("pod runner cannot run %s actions", a.Type)
	}

	labels := map[string]string{
		runners.LabelJobID:     labelValue(step.JobID),
		runners.LabelStep:      labelValue(step.Name),
		runners.LabelWorkspace: labelValue(step.Workspace),
		LabelWorker:            labelValue(pp.Worker),
	}
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      pp.Name,
			Namespace: pp.Namespace,
			Labels:    labels,
			// Label values are cut to what a label may hold; the
			// annotations keep the names whole.
			Annotations: map[string]string{
				runners.LabelJobID:     step.JobID,
				runners.LabelStep:      step.Name,
				runners.LabelWorkspace: step.Workspace,
			},
		},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			InitContainers: []corev1.Container{{
				Name:         podInitContainer,
				Image:        p.cfg.InitImage,
				Command:      []string{"appliance", "fetch-workspace"},
				Env:          envVars(initEnv),
				VolumeMounts: initMounts,
			}},
			Containers:         []corev1.Container{main},
			Volumes:            volumes,
			ServiceAccountName: p.cfg.ServiceAccount,
		},
	}
	for _, s := range p.cfg.ImagePullSecrets {
		pod.Spec.ImagePullSecrets = append(pod.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: s})
	}
	return pod, nil
}

// podImageAction runs the action's image as the docker runner does: `cmd`
// through the image's sh, else `entrypoint` (the image's ENTRYPOINT, a
// container's command) and `command` (its CMD, a container's args).
func podImageAction(c *corev1.Container, a *workflow.Action) error {
	if a.Image == "" {
		return fmt.Errorf("%s action needs an image", a.Type)
	}
	c.Image = a.Image
	switch {
	case a.Cmd != "":
		if len(a.Entrypoint) > 0 || len(a.Command) > 0 {
			return fmt.Errorf("%s action: cmd cannot be combined with entrypoint or command", a.Type)
		}
		c.Command = []string{"sh", "-c", a.Cmd}
	default:
		c.Command = a.Entrypoint
		c.Args = a.Command
	}
	if a.Workdir != "" {
		c.WorkingDir = path.Join("/", a.Workdir)
	}
	return nil
}

type podScriptFile struct {
	file   string
	inline bool
}

// podScript runs a script action with its language's interpreter in the
// language's image, in the workspace the init container fetched.
func (p *Runner) podScript(c *corev1.Container, a *workflow.Action) (podScriptFile, error) {
	if (a.Script == "") == (a.Source == "") {
		return podScriptFile{}, fmt.Errorf("script action needs exactly one of script and source")
	}
	if len(a.Dependencies) > 0 {
		return podScriptFile{}, fmt.Errorf("dependencies are not supported with runner pod: install them in the image (worker config docker.images)")
	}
	lang, err := runners.NormalLanguage(a.Language)
	if err != nil {
		return podScriptFile{}, err
	}
	image := p.cfg.Images[lang]
	if image == "" {
		return podScriptFile{}, fmt.Errorf("runner pod: no image for language %s (set docker.images.%s in the worker config)", lang, lang)
	}
	workdir, err := podInside(a.Workdir, "workdir")
	if err != nil {
		return podScriptFile{}, err
	}
	f := podScriptFile{file: runners.ContainerScript + runners.ScriptExt[lang], inline: a.Source == ""}
	if a.Source != "" {
		if f.file, err = podInside(a.Source, "source"); err != nil {
			return podScriptFile{}, err
		}
	}
	c.Image = image
	c.WorkingDir = workdir
	switch {
	case a.Interpreter != "":
		c.Command = runners.ScriptArgs(a.Interpreter, f.file)
	case lang == "shell":
		c.Command = []string{"sh", "-c", runners.ShellProbe, f.file}
	default:
		c.Command = runners.ScriptArgs(runners.ContainerInterpreters[lang], f.file)
	}
	return f, nil
}

// podInside is rel inside the pod's workspace, refused if it leaves it.
func podInside(rel, what string) (string, error) {
	if path.IsAbs(rel) {
		return "", fmt.Errorf("%s %q: must be relative to the workspace", what, rel)
	}
	p := path.Join(runners.ContainerWorkDir, rel)
	if p != runners.ContainerWorkDir && !strings.HasPrefix(p, runners.ContainerWorkDir+"/") {
		return "", fmt.Errorf("%s %q: leaves the workspace", what, rel)
	}
	return p, nil
}

// podResources makes the action's cpu and memory both the request and the
// limit of the step's container, as the docker runner caps them.
func podResources(r *workflow.Resources) (corev1.ResourceRequirements, error) {
	var out corev1.ResourceRequirements
	if r == nil {
		return out, nil
	}
	list := corev1.ResourceList{}
	for _, q := range []struct {
		name  corev1.ResourceName
		field string
		value string
	}{{corev1.ResourceCPU, "cpu", r.CPU}, {corev1.ResourceMemory, "memory", r.Memory}} {
		if q.value == "" {
			continue
		}
		v, err := resource.ParseQuantity(strings.TrimSpace(q.value))
		if err != nil || v.Sign() <= 0 {
			return out, fmt.Errorf("resources.%s %q: want a Kubernetes quantity such as \"500m\" or \"256Mi\"", q.field, q.value)
		}
		list[q.name] = v
	}
	if len(list) > 0 {
		out.Requests = list
		out.Limits = list.DeepCopy()
	}
	return out, nil
}

func envVars(env []string) []corev1.EnvVar {
	out := make([]corev1.EnvVar, 0, len(env))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		out = append(out, corev1.EnvVar{Name: k, Value: v})
	}
	return out
}

// labelValue makes s a valid label value: at most 63 characters of
// letters, digits, '-', '_' and '.', beginning and ending with a letter or
// digit. A value that had to be cut ends with a hash of the whole.
func labelValue(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			b[i] = '-'
		}
	}
	v := string(b)
	if len(v) > 63 {
		sum := sha256.Sum256([]byte(s))
		v = v[:54] + "-" + hex.EncodeToString(sum[:4])
	}
	return strings.TrimFunc(v, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	})
}

package pod

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/appliance-sh/appliance/runners"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// logDrainTimeout bounds the wait for a finished pod's last log lines.
const logDrainTimeout = 10 * time.Second

// podWatch follows one step pod from creation to its end.
type podWatch struct {
	p        *Runner
	name, ns string
	sink     func(stream, line string)
	logsDone chan struct{}
}

// pullFailures are the waiting reasons that mean an image will not come.
var pullFailures = map[string]bool{
	"ImagePullBackOff": true, "ErrImagePull": true, "InvalidImageName": true,
	"ErrImageNeverPull": true, "CreateContainerConfigError": true, "CreateContainerError": true,
}

func (w *podWatch) get(ctx context.Context) (*corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, podOpTimeout)
	defer cancel()
	return w.p.client.Pods(w.ns).Get(ctx, w.name, metav1.GetOptions{})
}

// run polls the pod until it ends, starting the log follower once the
// step's container runs, and returns the container's exit code, or an
// error a person can act on when the pod cannot run at all.
func (w *podWatch) run(ctx context.Context) (int, error) {
	began := time.Now()
	tick := time.NewTicker(w.p.cfg.PollInterval)
	defer tick.Stop()
	logCtx, stopLogs := context.WithCancel(ctx)
	defer stopLogs()
	failures := 0
	for {
		pod, err := w.get(ctx)
		switch {
		case ctx.Err() != nil:
			return runners.ExitKilled, nil
		case apierrors.IsNotFound(err):
			return 0, fmt.Errorf("pod %s was deleted before it finished (by someone other than this worker)", w.name)
		case err != nil:
			failures++
			if failures >= 5 {
				return 0, fmt.Errorf("read pod %s: %w", w.name, err)
			}
		default:
			failures = 0
			if msg := pullFailure(pod); msg != "" {
				return 0, errors.New(msg)
			}
			if w.logsDone == nil && containerStarted(pod) {
				w.startLogs(logCtx)
			}
			// The step ends with its container: a sidecar the manifest
			// added may run on, and is stopped by the pod's deletion.
			if containerEnded(pod) {
				return w.finish(ctx, pod)
			}
			switch pod.Status.Phase {
			case corev1.PodPending, "":
				if time.Since(began) > w.p.cfg.PodStartTimeout {
					return 0, errors.New(w.notStarted(pod))
				}
			}
		}
		select {
		case <-ctx.Done():
			return runners.ExitKilled, nil
		case <-tick.C:
		}
	}
}

// finish reads an ended pod's outcome once its log has been read.
func (w *podWatch) finish(ctx context.Context, pod *corev1.Pod) (int, error) {
	if pod.Status.Reason == "Evicted" {
		w.waitLogs(ctx)
		return 0, fmt.Errorf("pod %s was evicted from its node: %s (give the action resources the node can hold, or retry)", w.name, pod.Status.Message)
	}
	for _, cs := range pod.Status.InitContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			w.initLog(ctx, cs.Name)
			return 0, fmt.Errorf("init container %s of pod %s failed (exit code %d%s): the workspace or input could not be prepared", cs.Name, w.name, t.ExitCode, reasonSuffix(t.Reason, t.Message))
		}
	}
	if w.logsDone == nil {
		w.startLogs(ctx)
	}
	w.waitLogs(ctx)
	cs := stepStatus(pod)
	if cs == nil || cs.State.Terminated == nil {
		return 0, fmt.Errorf("pod %s ended (%s) without its step container running%s", w.name, pod.Status.Phase, reasonSuffix(pod.Status.Reason, pod.Status.Message))
	}
	t := cs.State.Terminated
	if t.ExitCode != 0 && t.Message != "" {
		for _, line := range strings.Split(strings.TrimRight(t.Message, "\n"), "\n") {
			w.sink(runners.Stderr, "termination message: "+line)
		}
	}
	if t.ExitCode != 0 && t.Reason == "OOMKilled" {
		w.sink(runners.Stderr, "the step's container ran out of memory (OOMKilled): raise resources.memory")
	}
	return int(t.ExitCode), nil
}

func reasonSuffix(reason, msg string) string {
	s := ""
	if reason != "" {
		s += ": " + reason
	}
	if msg != "" {
		s += ": " + strings.TrimSpace(msg)
	}
	return s
}

// pullFailure says why an image of the pod cannot be pulled, or "".
func pullFailure(pod *corev1.Pod) string {
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range list {
			if wt := cs.State.Waiting; wt != nil && pullFailures[wt.Reason] {
				image := cs.Image
				for _, c := range append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
					if c.Name == cs.Name {
						image = c.Image
					}
				}
				hint := "check the image name and tag, and that the registry is reachable with the worker's kubernetes.image_pull_secrets"
				if strings.HasPrefix(wt.Reason, "CreateContainer") {
					hint = "check the container's configuration (env from secrets or config maps that must exist)"
				}
				return fmt.Sprintf("container %s of pod %s cannot start: %s: %s (image %q): %s", cs.Name, pod.Name, wt.Reason, strings.TrimSpace(wt.Message), image, hint)
			}
		}
	}
	return ""
}

// notStarted explains a pod still pending at the start timeout.
func (w *podWatch) notStarted(pod *corev1.Pod) string {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return fmt.Sprintf("pod %s could not be scheduled within %s (kubernetes.pod_start_timeout): %s: %s (check the action's resources, node selector and tolerations against the cluster's nodes)",
				w.name, w.p.cfg.PodStartTimeout, c.Reason, c.Message)
		}
	}
	var waiting []string
	for _, cs := range append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		if wt := cs.State.Waiting; wt != nil {
			waiting = append(waiting, cs.Name+": "+wt.Reason)
		}
	}
	detail := ""
	if len(waiting) > 0 {
		detail = " (" + strings.Join(waiting, ", ") + ")"
	}
	return fmt.Sprintf("pod %s did not start within %s (kubernetes.pod_start_timeout)%s", w.name, w.p.cfg.PodStartTimeout, detail)
}

func stepStatus(pod *corev1.Pod) *corev1.ContainerStatus {
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == podStepContainer {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	return nil
}

func containerStarted(pod *corev1.Pod) bool {
	cs := stepStatus(pod)
	return cs != nil && (cs.State.Running != nil || cs.State.Terminated != nil)
}

func containerEnded(pod *corev1.Pod) bool {
	cs := stepStatus(pod)
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed || (cs != nil && cs.State.Terminated != nil)
}

// startLogs follows the step container's log into the sink, reopening
// the stream from the last line's time when it drops while the container
// runs.
func (w *podWatch) startLogs(ctx context.Context) {
	w.logsDone = make(chan struct{})
	f := &logFollower{logs: w.p.logs, ns: w.ns, pod: w.name, container: podStepContainer, sink: w.sink}
	go func() {
		defer close(w.logsDone)
		for ctx.Err() == nil {
			_, err := f.follow(ctx)
			if ctx.Err() != nil {
				return
			}
			pod, gerr := w.get(ctx)
			if apierrors.IsNotFound(gerr) {
				return
			}
			if gerr == nil && containerEnded(pod) {
				if err != nil {
					// The stream dropped as the container ended: one more
					// read takes the lines it did not bring.
					_, _ = f.follow(ctx)
				}
				return
			}
			if err != nil {
				w.p.log.Debug("pod log stream dropped; reopening", "pod", w.name, "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(w.p.cfg.PollInterval):
			}
		}
	}()
}

func (w *podWatch) waitLogs(ctx context.Context) {
	if w.logsDone == nil {
		return
	}
	t := time.NewTimer(logDrainTimeout)
	defer t.Stop()
	select {
	case <-w.logsDone:
	case <-ctx.Done():
	case <-t.C:
		w.sink(runners.Stderr, "appliance: the pod's log did not end in time; its last lines may be missing")
	}
}

// initLog passes a failed init container's log on as stderr.
func (w *podWatch) initLog(ctx context.Context, container string) {
	ctx, cancel := context.WithTimeout(ctx, logDrainTimeout)
	defer cancel()
	f := &logFollower{logs: w.p.logs, ns: w.ns, pod: w.name, container: container,
		sink: func(_, line string) { w.sink(runners.Stderr, line) }}
	_, _ = f.follow(ctx)
}

// delete deletes the pod with the grace period given and, if it is still
// there once the grace has passed, without any.
func (w *podWatch) delete(ctx context.Context, grace time.Duration) {
	pods := w.p.client.Pods(w.ns)
	// Whole seconds, rounded up: a grace of 0 deletes at once.
	secs := int64((grace + time.Second - 1) / time.Second)
	dctx, cancel := context.WithTimeout(ctx, podOpTimeout)
	err := pods.Delete(dctx, w.name, metav1.DeleteOptions{GracePeriodSeconds: &secs})
	cancel()
	if apierrors.IsNotFound(err) {
		return
	}
	if err != nil {
		w.p.log.Error("delete step pod", "pod", w.name, "err", err)
	}
	if grace <= 0 {
		return
	}
	deadline := time.Now().Add(grace + 2*w.p.cfg.PollInterval)
	for time.Now().Before(deadline) {
		if _, err := w.get(ctx); apierrors.IsNotFound(err) {
			return
		}
		time.Sleep(min(w.p.cfg.PollInterval, time.Until(deadline)))
	}
	dctx, cancel = context.WithTimeout(ctx, podOpTimeout)
	defer cancel()
	if err := pods.Delete(dctx, w.name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}); err != nil && !apierrors.IsNotFound(err) {
		w.p.log.Error("force-delete step pod", "pod", w.name, "err", err)
	}
}

package workspace

import "github.com/appliance-sh/appliance/engine/workflow"

// retryKeys are allowed on a flow step and on an action (as its default).
var retryKeys = set("retries", "retry_delay", "retry_backoff")

// retrySpec reads the retry fields of a step or an action.
func retrySpec(o obj) workflow.RetrySpec {
	var r workflow.RetrySpec
	if v, ok := o.get("retries"); ok {
		if n, ok := v.integer(); ok {
			if n < 0 || n > workflow.MaxRetries {
				v.errorf("retries must be between 0 and %d, got %d", workflow.MaxRetries, n)
			} else {
				r.Retries = &n
			}
		}
	}
	if v, ok := o.get("retry_delay"); ok {
		if s, ok := v.text(); ok {
			d, err := workflow.ParseDuration(s)
			switch {
			case err != nil:
				v.errorf("%v", err)
			case d.Std() > workflow.MaxRetryDelay:
				v.errorf("retry_delay %s is over the maximum of 5m", s)
			default:
				r.RetryDelay = &d
			}
		}
	}
	if v, ok := o.get("retry_backoff"); ok {
		if f, ok := v.number(); ok {
			if f < 1 || f > 10 {
				v.errorf("retry_backoff must be between 1 (constant delay) and 10, got %v", f)
			} else {
				r.RetryBackoff = &f
			}
		}
	}
	return r
}

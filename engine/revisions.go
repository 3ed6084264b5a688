package engine

import "context"

// LiveRevisions returns the workspace revisions the engine's non-terminal
// jobs run on, by workspace: the files of these must stay available until
// the jobs end.
func (e *Engine) LiveRevisions(ctx context.Context) (map[string]map[string]bool, error) {
	v, err := e.do(ctx, func(*batch) (any, error) {
		out := map[string]map[string]bool{}
		for _, js := range e.st.jobs {
			j := js.job
			if out[j.Workspace] == nil {
				out[j.Workspace] = map[string]bool{}
			}
			out[j.Workspace][j.Revision] = true
		}
		return out, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(map[string]map[string]bool), nil
}

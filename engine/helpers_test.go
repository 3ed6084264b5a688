package engine_test

import "errors"

func errorsIs(err, target error) bool { return errors.Is(err, target) }

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

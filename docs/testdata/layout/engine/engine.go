// Package engine reaches net/http through its own module's packages.
package engine

import _ "example.com/layout/engine/workflow"

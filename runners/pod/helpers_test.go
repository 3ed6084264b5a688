package pod

import "github.com/appliance-sh/appliance/runners/runnertest"

var eventually = runnertest.Eventually

package enginetest_test

import (
	"testing"

	"github.com/appliance-sh/appliance/engine/enginetest"
	"github.com/appliance-sh/appliance/engine/storetest"
)

// MemStore, the engine tests' store, behaves as the bbolt store does: the
// same conformance suite runs over both. It keeps nothing across a process
// restart (an engine restart in a test reuses the same MemStore instead).
func TestMemStoreConformance(t *testing.T) {
	storetest.Run(t, storetest.Backend{
		Open: func(t *testing.T) storetest.Store { return enginetest.NewMemStore() },
	})
}

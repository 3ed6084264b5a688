// Package docs holds the map of the repository, architecture.md, and the
// test that holds the code to the import rules written in it.
// It imports no package of the module: it reads them with go list.
package docs

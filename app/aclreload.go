package app

import (
	"fmt"

	"github.com/appliance-sh/appliance/accounts"
	"github.com/appliance-sh/appliance/app/config"
)

// reloadACL re-reads the server config at path and puts its acl section
// in force in place of current, in place (SIGHUP): requests judge by the
// new rules at once, and open streams re-check at once (accounts.ACL
// Replace). Only the acl section is applied; a config that does not load,
// or that would turn the ACL on or off (the API is built with or without
// one), leaves the ACL in force and says why. It returns the start-up
// line of the new ACL.
func reloadACL(path string, current *accounts.ACL) (string, error) {
	next, err := config.LoadServer(path)
	if err != nil {
		return "", fmt.Errorf("reload acl: %w; the acl in force stays", err)
	}
	switch {
	case current == nil && next.Effective.ACL == nil:
		return next.ACL.Describe(), nil
	case current == nil:
		return "", fmt.Errorf("reload acl: %s adds an acl section, which needs a restart; the server stays without an acl", path)
	case next.Effective.ACL == nil:
		return "", fmt.Errorf("reload acl: %s has no acl section; removing the acl needs a restart; the acl in force stays", path)
	}
	current.Replace(next.Effective.ACL)
	return next.ACL.Describe(), nil
}

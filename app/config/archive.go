package config

import (
	"fmt"
)

// Archive is log_storage.archive: where finished jobs' logs are kept.
type Archive struct {
	Type     string `yaml:"type"` // s3 or local
	Bucket   string `yaml:"bucket"`
	Region   string `yaml:"region"`
	Prefix   string `yaml:"prefix"`
	Endpoint string `yaml:"endpoint"` // S3-compatible endpoint; http:// means no TLS
	Path     string `yaml:"path"`     // local
}

// LegacyS3 is the older log_storage.s3 form of an s3 archive.
type LegacyS3 struct {
	Bucket   string `yaml:"bucket"`
	Region   string `yaml:"region"`
	Prefix   string `yaml:"prefix"`
	Endpoint string `yaml:"endpoint"`
}

// EffectiveArchive returns the effective archive settings and the config key they
// came from, nil when logs are not archived. `archive` wins over the
// legacy `s3` when both are set.
func (c LogStorage) EffectiveArchive() (*Archive, string, error) {
	switch {
	case c.Archive != nil:
		return c.Archive, "log_storage.archive", validateArchive(*c.Archive, "log_storage.archive")
	case c.S3 != nil:
		a := &Archive{Type: "s3", Bucket: c.S3.Bucket, Region: c.S3.Region, Prefix: c.S3.Prefix, Endpoint: c.S3.Endpoint}
		return a, "log_storage.s3", validateArchive(*a, "log_storage.s3")
	}
	return nil, "", nil
}

// validateArchive checks the fields each type requires, and refuses those
// it would ignore, since a misplaced field is usually a mistaken type.
func validateArchive(a Archive, key string) error {
	type field struct{ name, value string }
	var required, unused []field
	switch a.Type {
	case "s3":
		required = []field{{"bucket", a.Bucket}, {"region", a.Region}}
		unused = []field{{"path", a.Path}}
	case "local":
		required = []field{{"path", a.Path}}
		unused = []field{{"bucket", a.Bucket}, {"region", a.Region}, {"endpoint", a.Endpoint}}
	case "":
		return fmt.Errorf("%s.type: required (s3 or local)", key)
	default:
		return fmt.Errorf("%s.type: unsupported type %q (supported: s3, local)", key, a.Type)
	}
	for _, f := range required {
		if f.value == "" {
			return fmt.Errorf("%s.%s: required for type %s", key, f.name, a.Type)
		}
	}
	for _, f := range unused {
		if f.value != "" {
			return fmt.Errorf("%s.%s: not used by type %s", key, f.name, a.Type)
		}
	}
	return nil
}

// DescribeArchive is the start-up line for the archive setting.
func (c LogStorage) DescribeArchive() string {
	a, _, err := c.EffectiveArchive()
	switch {
	case err != nil:
		return err.Error()
	case a == nil:
		return "off"
	case a.Type == "local":
		return fmt.Sprintf("local %s (prefix %q)", a.Path, a.Prefix)
	}
	endpoint := a.Endpoint
	if endpoint == "" {
		endpoint = "aws"
	}
	return fmt.Sprintf("s3 bucket %s, region %s, endpoint %s (prefix %q)", a.Bucket, a.Region, endpoint, a.Prefix)
}

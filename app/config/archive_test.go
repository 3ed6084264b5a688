package config

import (
	"testing"
)

func TestArchiveConfig(t *testing.T) {
	cases := []struct {
		name, yaml, wantErr, want string // want: DescribeArchive of a valid config
	}{
		{name: "none", yaml: "log_storage: {local_dir: /l}\n", want: "off"},
		{name: "local", yaml: "log_storage:\n  archive: {type: local, path: /srv/archive}\n", want: `local /srv/archive (prefix "")`},
		{name: "s3 on aws", yaml: "log_storage:\n  archive: {type: s3, bucket: logs, region: eu-west-1, prefix: appliance/}\n",
			want: `s3 bucket logs, region eu-west-1, endpoint aws (prefix "appliance/")`},
		{name: "s3 compatible", yaml: "log_storage:\n  archive: {type: s3, bucket: logs, region: us-east-1, endpoint: 'http://minio:9000'}\n",
			want: `s3 bucket logs, region us-east-1, endpoint http://minio:9000 (prefix "")`},
		{name: "legacy s3", yaml: "log_storage:\n  s3: {bucket: old, region: us-west-2, prefix: x/}\n",
			want: `s3 bucket old, region us-west-2, endpoint aws (prefix "x/")`},
		{name: "archive wins over legacy s3", yaml: "log_storage:\n  archive: {type: local, path: /a}\n  s3: {bucket: old, region: us-west-2}\n",
			want: `local /a (prefix "")`},
		{name: "missing type", yaml: "log_storage:\n  archive: {path: /a}\n", wantErr: "log_storage.archive.type: required (s3 or local)"},
		{name: "unknown type", yaml: "log_storage:\n  archive: {type: gcs, bucket: b}\n", wantErr: `log_storage.archive.type: unsupported type "gcs" (supported: s3, local)`},
		{name: "s3 without bucket", yaml: "log_storage:\n  archive: {type: s3, region: r}\n", wantErr: "log_storage.archive.bucket: required for type s3"},
		{name: "s3 without region", yaml: "log_storage:\n  archive: {type: s3, bucket: b}\n", wantErr: "log_storage.archive.region: required for type s3"},
		{name: "s3 with a path", yaml: "log_storage:\n  archive: {type: s3, bucket: b, region: r, path: /a}\n", wantErr: "log_storage.archive.path: not used by type s3"},
		{name: "local without path", yaml: "log_storage:\n  archive: {type: local}\n", wantErr: "log_storage.archive.path: required for type local"},
		{name: "local with a bucket", yaml: "log_storage:\n  archive: {type: local, path: /a, bucket: b}\n", wantErr: "log_storage.archive.bucket: not used by type local"},
		{name: "legacy without bucket", yaml: "log_storage:\n  s3: {region: r}\n", wantErr: "log_storage.s3.bucket: required for type s3"},
		{name: "legacy has no type", yaml: "log_storage:\n  s3: {type: s3, bucket: b, region: r}\n", wantErr: `:2:8: unknown field "type"`},
		{name: "unknown archive key", yaml: "log_storage:\n  archive:\n    type: local\n    paht: /a\n", wantErr: ":4:5: "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := loadConfigText(t, c.yaml)
			if configErrorChecked(t, err, c.wantErr) {
				return
			}
			if got := cfg.LogStorage.DescribeArchive(); got != c.want {
				t.Errorf("archive = %s, want %s", got, c.want)
			}
		})
	}
}

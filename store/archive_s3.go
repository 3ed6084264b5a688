package store

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/appliance-sh/appliance/engine"
)

// defaultS3Endpoint is AWS; minio-go turns it into the region's endpoint.
const defaultS3Endpoint = "s3.amazonaws.com"

// S3Archive keeps archived logs as objects in an S3 (or S3-compatible)
// bucket.
type S3Archive struct {
	client *minio.Client
	bucket string
}

var _ Archive = (*S3Archive)(nil)

// NewS3Archive connects to cfg.Bucket. Credentials come from the standard
// chain: AWS_* environment variables, the shared credentials file, then the
// instance role; with none of them requests are anonymous.
func NewS3Archive(cfg ArchiveConfig) (*S3Archive, error) {
	if cfg.Bucket == "" {
		return nil, fmt.Errorf("s3 archive: bucket is required: %w", engine.ErrInvalid)
	}
	host, secure, err := parseS3Endpoint(cfg.Endpoint)
	if err != nil {
		return nil, err
	}
	client, err := minio.New(host, &minio.Options{
		Creds: credentials.NewChainCredentials([]credentials.Provider{
			&credentials.EnvAWS{},
			&credentials.FileAWSCredentials{},
			&credentials.IAM{},
		}),
		Secure: secure,
		Region: cfg.Region,
	})
	if err != nil {
		return nil, fmt.Errorf("s3 archive: %w", err)
	}
	return &S3Archive{client: client, bucket: cfg.Bucket}, nil
}

// parseS3Endpoint accepts host[:port] (TLS), https://host[:port] or
// http://host[:port] (no TLS); empty means AWS.
func parseS3Endpoint(endpoint string) (host string, secure bool, err error) {
	if endpoint == "" {
		return defaultS3Endpoint, true, nil
	}
	if !strings.Contains(endpoint, "://") {
		endpoint = "https://" + endpoint
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", false, fmt.Errorf("s3 archive: endpoint %q: %w", endpoint, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", false, fmt.Errorf("s3 archive: endpoint %q: scheme must be http or https: %w", endpoint, engine.ErrInvalid)
	}
	if u.Host == "" || strings.Trim(u.Path, "/") != "" || u.RawQuery != "" {
		return "", false, fmt.Errorf("s3 archive: endpoint %q must be a scheme and host[:port] only: %w", endpoint, engine.ErrInvalid)
	}
	return u.Host, u.Scheme == "https", nil
}

// Put uploads one object.
func (a *S3Archive) Put(ctx context.Context, key string, gzipped []byte) error {
	if err := checkArchiveKey(key); err != nil {
		return fmt.Errorf("archive log: %w", err)
	}
	_, err := a.client.PutObject(ctx, a.bucket, key, bytes.NewReader(gzipped), int64(len(gzipped)),
		minio.PutObjectOptions{ContentType: "application/gzip"})
	if err != nil {
		return fmt.Errorf("upload s3://%s/%s: %w", a.bucket, key, err)
	}
	return nil
}

// Get downloads one object (engine.ErrNotFound when there is none).
func (a *S3Archive) Get(ctx context.Context, key string) ([]byte, error) {
	if err := checkArchiveKey(key); err != nil {
		return nil, fmt.Errorf("read archive: %w", err)
	}
	obj, err := a.client.GetObject(ctx, a.bucket, key, minio.GetObjectOptions{})
	if err == nil {
		defer obj.Close()
		var data []byte
		// minio-go reports a missing object on the first read, not on GetObject.
		if data, err = io.ReadAll(obj); err == nil {
			return data, nil
		}
	}
	if minio.ToErrorResponse(err).Code == minio.NoSuchKey {
		return nil, fmt.Errorf("s3://%s/%s: %w", a.bucket, key, engine.ErrNotFound)
	}
	return nil, fmt.Errorf("download s3://%s/%s: %w", a.bucket, key, err)
}

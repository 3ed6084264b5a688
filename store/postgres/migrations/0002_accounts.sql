-- Accounts: users, auth links, refresh tokens, API keys; revision snapshots.
--
-- Each account record is kept as the JSON the bbolt store keeps (record,
-- type json: the bytes as written, so a field added to a record later
-- carries over without a migration), beside the columns its lookups,
-- uniqueness and invariants need. Names compared and ordered as bbolt
-- orders its keys use COLLATE "C" (byte order), whatever the database's
-- locale. Times that are compared are Unix nanoseconds, exact as in bbolt.

CREATE TABLE users (
    id         text COLLATE "C" PRIMARY KEY,
    email_key  text NOT NULL,        -- the email, lower-cased by Go as bbolt does
    created_ns bigint NOT NULL,      -- created_at: users list in this order, then by id
    is_admin   boolean NOT NULL,
    groups     text[] NOT NULL,
    record     json NOT NULL,
    CONSTRAINT users_email_unique UNIQUE (email_key)
);
CREATE INDEX users_by_creation ON users (created_ns, id);
-- The last-admin check reads only the admins.
CREATE INDEX users_admins ON users (id) WHERE is_admin;

CREATE TABLE auth_links (
    provider text NOT NULL,
    subject  text NOT NULL,
    user_id  text COLLATE "C" NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    record   json NOT NULL,
    PRIMARY KEY (provider, subject)
);
CREATE INDEX auth_links_by_user ON auth_links (user_id);

-- A rotated token stays until it expires, so its reuse is recognised.
CREATE TABLE refresh_tokens (
    hash       text PRIMARY KEY,
    user_id    text NOT NULL,
    family     text NOT NULL,        -- FamilyID(): the family, or the hash of a token stored without one
    expires_ns bigint NOT NULL,
    record     json NOT NULL
);
CREATE INDEX refresh_tokens_by_family ON refresh_tokens (family, expires_ns);
CREATE INDEX refresh_tokens_by_user ON refresh_tokens (user_id, family);

CREATE TABLE api_keys (
    hash    text PRIMARY KEY,        -- hex SHA-256 of the key
    user_id text NOT NULL,
    prefix  text COLLATE "C" NOT NULL,
    record  json NOT NULL,
    CONSTRAINT api_keys_user_prefix_unique UNIQUE (user_id, prefix)
);

-- Every workspace revision jobs run on, as the gzip tarball of its files,
-- so any replica can serve any revision. used_at is when it was last saved
-- or kept by a sweep: the sweep's grace counts from it.
CREATE TABLE revision_snapshots (
    workspace  text NOT NULL,
    revision   text NOT NULL,
    tarball    bytea NOT NULL,
    created_at timestamptz NOT NULL,
    used_at    timestamptz NOT NULL,
    PRIMARY KEY (workspace, revision)
);

-- Message templates (issue 36): immutable versions of Liquid sources the
-- email and sms nodes render. template_heads holds each name's latest
-- version and whether it is deleted now; template_deletions remembers each
-- delete (after which version, when), so an execution pinned to a time
-- renders what was current then.
CREATE TABLE template_heads (
  name text PRIMARY KEY,
  latest integer NOT NULL,
  deleted_at timestamptz
);
CREATE TABLE templates (
  name text NOT NULL REFERENCES template_heads (name),
  version integer NOT NULL,
  subject text NOT NULL DEFAULT '',
  text text NOT NULL DEFAULT '',
  html text NOT NULL DEFAULT '',
  body text NOT NULL DEFAULT '',
  layout text NOT NULL DEFAULT '',
  created_at timestamptz NOT NULL,
  PRIMARY KEY (name, version)
);
CREATE TABLE template_deletions (
  name text NOT NULL REFERENCES template_heads (name),
  after_version integer NOT NULL,
  deleted_at timestamptz NOT NULL,
  PRIMARY KEY (name, after_version)
);

-- Message templates (issue 36): immutable versions of Liquid sources the
-- email and sms nodes render. template_heads holds each name's latest
-- version and whether it is deleted now; template_deletions remembers each
-- delete (after which version, when), so an execution pinned to a time
-- renders what was current then.
CREATE TABLE template_heads (
  name TEXT PRIMARY KEY,
  latest INTEGER NOT NULL,
  deleted_at INTEGER
);
CREATE TABLE templates (
  name TEXT NOT NULL REFERENCES template_heads (name),
  version INTEGER NOT NULL,
  subject TEXT NOT NULL DEFAULT '',
  text TEXT NOT NULL DEFAULT '',
  html TEXT NOT NULL DEFAULT '',
  body TEXT NOT NULL DEFAULT '',
  layout TEXT NOT NULL DEFAULT '',
  created_at INTEGER NOT NULL,
  PRIMARY KEY (name, version)
);
CREATE TABLE template_deletions (
  name TEXT NOT NULL REFERENCES template_heads (name),
  after_version INTEGER NOT NULL,
  deleted_at INTEGER NOT NULL,
  PRIMARY KEY (name, after_version)
);

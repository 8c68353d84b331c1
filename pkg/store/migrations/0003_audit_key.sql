-- The SSH key an operator acted with (`tasktop serve`): its SHA256
-- fingerprint, as OpenSSH prints it. Empty for the CLI and a local
-- tasktop, whose actor is the OS user.
ALTER TABLE task_audit
  ADD COLUMN IF NOT EXISTS key_fingerprint VARCHAR(64) NOT NULL DEFAULT '' AFTER origin;

-- A stdio server's command (JSON: program, args, env, secretEnv, cwd): Countersign starts the
-- process itself. `env` holds only values given as plain; the values of the `secretEnv` names
-- live in the OS keyring. NULL: an HTTP server. A stdio server's url is `stdio:NAME`.
ALTER TABLE servers ADD COLUMN command TEXT;

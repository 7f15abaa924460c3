import { execFile } from "node:child_process";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import type { PrivatePostgres } from "./private-postgres.ts";

const run = promisify(execFile);

/**
 * Turns TLS on in a private Postgres (ALTER SYSTEM, reload), with a server certificate for the
 * name `localhost` signed by a CA of the test's own (openssl): as a managed Postgres whose CA is
 * not among Node's. Returns the CA's file, for `sslrootcert`.
 */
export async function enableTls(pg: PrivatePostgres): Promise<{ caFile: string; dir: string }> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), "signalbox-tls-"));
  await fs.chmod(dir, 0o755);
  const f = (name: string) => path.join(dir, name);
  const openssl = (...args: string[]) => run("openssl", args);
  await openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f("ca.key"), "-out", f("ca.pem"), "-days", "2", "-subj", "/CN=signalbox test CA");
  await openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f("server.key"), "-out", f("server.csr"), "-subj", "/CN=localhost");
  await fs.writeFile(f("ext.cnf"), "subjectAltName=DNS:localhost\n");
  await openssl("x509", "-req", "-in", f("server.csr"), "-CA", f("ca.pem"), "-CAkey", f("ca.key"), "-CAcreateserial", "-out", f("server.crt"), "-days", "2", "-extfile", f("ext.cnf"));
  // Postgres reads its key only if its own user owns it, private.
  const [setting] = await pg.admin<Array<{ dir: string }>>`select current_setting('data_directory') as dir`;
  const owner = await fs.stat(setting!.dir);
  for (const name of ["server.key", "server.crt"]) await fs.chown(f(name), owner.uid, owner.gid);
  await fs.chmod(f("server.key"), 0o600);
  await pg.admin.unsafe(`alter system set ssl_cert_file = '${f("server.crt")}'`);
  await pg.admin.unsafe(`alter system set ssl_key_file = '${f("server.key")}'`);
  await pg.admin.unsafe("alter system set ssl = on");
  await pg.admin`select pg_reload_conf()`;
  await new Promise((r) => setTimeout(r, 300)); // the postmaster reads it on SIGHUP, soon after
  return { caFile: f("ca.pem"), dir };
}

/** The private Postgres's URL with `params` (sslmode, sslrootcert) and host `localhost` (the certificate's name). */
export function tlsUrl(pg: PrivatePostgres, params: Record<string, string>): string {
  const u = new URL(pg.url);
  u.hostname = "localhost";
  for (const [k, v] of Object.entries(params)) u.searchParams.set(k, v);
  return u.toString();
}

/**
 * A certificate revocation list signed by enableTls's CA (openssl ca), revoking the server's
 * certificate or nothing. Returns its file, for `sslcrl`.
 */
export async function revocationList(tls: { dir: string }, revokeServer: boolean): Promise<string> {
  const dir = await fs.mkdtemp(path.join(tls.dir, "crl-"));
  const f = (name: string) => path.join(dir, name);
  await fs.writeFile(f("index.txt"), "");
  await fs.writeFile(f("crlnumber"), "01\n");
  await fs.writeFile(f("ca.cnf"), `[ca]\ndefault_ca=d\n[d]\ndatabase=${f("index.txt")}\ncrlnumber=${f("crlnumber")}\ndefault_md=sha256\ndefault_crl_days=2\n`);
  const ca = ["-config", f("ca.cnf"), "-keyfile", path.join(tls.dir, "ca.key"), "-cert", path.join(tls.dir, "ca.pem")];
  if (revokeServer) await run("openssl", ["ca", ...ca, "-revoke", path.join(tls.dir, "server.crt")]);
  await run("openssl", ["ca", ...ca, "-gencrl", "-out", f("list.crl")]);
  return f("list.crl");
}

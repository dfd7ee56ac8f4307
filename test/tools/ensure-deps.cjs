// Installs the project's dependencies from package-lock.json when they are missing or older
// than the lockfile, so that `npm start` and `npm test` work on a fresh clone by themselves.
// Runs before the dependencies exist, so it is plain CommonJS for the machine's own Node 20.
//
// Why `npm install` and not `npm ci`: npm 11 here writes lockfiles without other platforms'
// optional packages (biome's and DuckDB's native builds) and then its own `npm ci` rejects
// them as out of sync. `npm install` with a lockfile installs the locked versions.
const { execSync } = require('node:child_process');
const { existsSync, statSync } = require('node:fs');
const { join } = require('node:path');

const root = join(__dirname, '..', '..');
const installed = join(root, 'node_modules', '.package-lock.json');
const lock = join(root, 'package-lock.json');
const node24 = join(root, 'node_modules', '.bin', 'node');

const stale =
  !existsSync(installed) || !existsSync(node24) || statSync(installed).mtimeMs < statSync(lock).mtimeMs;
if (stale) {
  process.stderr.write('Installing dependencies from package-lock.json (Node 24 included)…\n');
  execSync('npm install --no-audit --no-fund', { cwd: root, stdio: 'inherit' });
}

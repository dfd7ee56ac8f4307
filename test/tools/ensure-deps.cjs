// The pre-script of the npm scripts that run the project (package.json `pre<name>`). Two jobs:
//
// 1. Installs the project's dependencies from package-lock.json when they are missing or older
//    than the lockfile, so that `npm start` and `npm test` work on a fresh clone by themselves.
// 2. Checks the Node the script will run on, and stops it (exit 2, one line) when that Node is
//    older than package.json `engines` says.
//
// Runs before the dependencies exist, so it is plain CommonJS for the machine's own Node 20.
// `npm run` puts node_modules/.bin first on PATH, and the devDependency `node` puts Node 24
// there: the scripts (tsx, cdk) start it through their `#!/usr/bin/env node` line. So the Node
// that matters is the first `node` on PATH once the install is done; this file itself may run
// on an older one, the one that was first before node_modules/.bin/node existed.
//
// Why `npm install` and not `npm ci`: npm 11 here writes lockfiles without other platforms'
// optional packages (biome's and DuckDB's native builds) and then its own `npm ci` rejects
// them as out of sync. `npm install` with a lockfile installs the locked versions.
const { execFileSync, execSync } = require('node:child_process');
const { existsSync, statSync } = require('node:fs');
const { join } = require('node:path');
const { nodeVersionProblem } = require('../../functions/cli/node-version.cjs');

const root = join(__dirname, '..', '..');
const installed = join(root, 'node_modules', '.package-lock.json');
const lock = join(root, 'package-lock.json');
const node24 = join(root, 'node_modules', '.bin', 'node');
const engines = require(join(root, 'package.json')).engines.node;

const stale =
  !existsSync(installed) || !existsSync(node24) || statSync(installed).mtimeMs < statSync(lock).mtimeMs;
if (stale) {
  process.stderr.write('Installing dependencies from package-lock.json (Node 24 included)…\n');
  execSync('npm install --no-audit --no-fund', { cwd: root, stdio: 'inherit' });
}

/**
 * The version of the first `node` on PATH. Unless the install just put node_modules/.bin/node
 * there, that is the one running this file: `npm run` started it as `node …` on the same PATH.
 */
function scriptNodeVersion() {
  if (!stale) return process.versions.node;
  try {
    return execFileSync('node', ['-p', 'process.versions.node'], { encoding: 'utf8' }).trim();
  } catch {
    return process.versions.node; // No `node` on PATH to ask: the one running this is the best guess.
  }
}

const problem = nodeVersionProblem(
  scriptNodeVersion(),
  engines,
  // node_modules/.bin/node is missing or broken (an install with --ignore-scripts or
  // --omit=dev, or a run outside `npm run`): the project's own Node 24 is the fix.
  'run the script with `npm run <script>` after `npm install`, which puts Node 24 into node_modules/.bin (package.json devDependencies `node`), or install Node 22.15 or later (`nvm install 22`, or https://nodejs.org/en/download)',
);
if (problem !== undefined) {
  process.stderr.write(`${problem}\n`);
  process.exit(2);
}

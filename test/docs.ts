/** `npm run docs`: rewrites the README's table reference from shared/export/tables.ts. */
import { readFileSync, writeFileSync } from 'node:fs';
import { withTablesDoc } from '../shared/export/format/tables-doc.js';

const path = new URL('../README.md', import.meta.url);
writeFileSync(path, withTablesDoc(readFileSync(path, 'utf8')));

/** `npm run docs`: rewrites the column reference of docs/query.md from shared/export/tables.ts. */
import { readFileSync, writeFileSync } from 'node:fs';
import { withTablesDoc } from '../shared/export/format/tables-doc.js';

const path = new URL('../docs/query.md', import.meta.url);
writeFileSync(path, withTablesDoc(readFileSync(path, 'utf8')));

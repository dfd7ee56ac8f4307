import type { ValidationIssue } from '../../api/client.js';
import type { Storage } from '../../storage/storage.js';
import { quarantineKey } from '../layout.js';
import { encodeRecord, type RunRef } from './records.js';

export interface QuarantineEntry {
  /** What it was, e.g. `campaign-12-job-345` or `campaigns-page-item-7`. */
  name: string;
  /** The body as received: text for a report response, the parsed item for a list item. */
  body: unknown;
  issues: readonly ValidationIssue[];
  fetched_at: string;
}

/** Keeps a body that failed validation under quarantine/, with its validation issues. */
export async function quarantine(storage: Storage, run: RunRef, entry: QuarantineEntry): Promise<string> {
  const key = quarantineKey(run.dt, run.run_id, entry.name);
  await storage.put(key, encodeRecord({ run_id: run.run_id, ...entry }));
  return key;
}

import type { ValidationIssue } from '../../api/client.js';
import { quarantineKey } from '../../layout.js';
import type { Storage } from '../../storage/storage.js';
import { stringifyIterative } from '../format/json-text.js';
import { encodeRecord, type RunRef } from './records.js';

export interface QuarantineEntry {
  /** What it was, e.g. `campaign-12-job-345` or `campaigns-page-item-7`. */
  name: string;
  /**
   * The body as received: text for a report response, the parsed item for a list item. A
   * parsed value too deep for JSON.stringify is written as its JSON text instead, and the
   * record then says `body_format: "json_text"`.
   */
  body: unknown;
  issues: readonly ValidationIssue[];
  fetched_at: string;
}

/** Keeps a body that failed validation under quarantine/, with its validation issues. */
export async function quarantine(storage: Storage, run: RunRef, entry: QuarantineEntry): Promise<string> {
  const key = quarantineKey(run.dt, run.run_id, entry.name);
  await storage.put(key, quarantineRecord(run, entry));
  return key;
}

/**
 * The record's text. A body nested deeper than JSON.stringify can go (thousands of levels: the
 * very bodies that fail validation for their depth) is kept as text, so that it is still kept.
 */
function quarantineRecord(run: RunRef, entry: QuarantineEntry): string {
  try {
    return encodeRecord({ run_id: run.run_id, ...entry });
  } catch (error) {
    if (!(error instanceof RangeError)) throw error;
    const body = stringifyIterative(entry.body);
    return encodeRecord({ run_id: run.run_id, ...entry, body, body_format: 'json_text' });
  }
}

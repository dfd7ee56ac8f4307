import { createHash } from 'node:crypto';

/** JSON with object keys sorted at every level, so equal values give equal text. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => {
    if (v === null || typeof v !== 'object' || Array.isArray(v)) return v;
    const sorted: Record<string, unknown> = {};
    for (const k of Object.keys(v).sort()) sorted[k] = (v as Record<string, unknown>)[k];
    return sorted;
  });
}

/**
 * A short, stable fingerprint of a list item: a job whose item changes (status, score, any
 * field) gets a new fingerprint, so an incremental run fetches its report again.
 */
export function fingerprint(item: unknown): string {
  return createHash('sha256').update(canonicalJson(item)).digest('base64url').slice(0, 22);
}

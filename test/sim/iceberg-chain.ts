/**
 * A table's metadata files in commit order, as the invariants read them: with the file catalog,
 * `v1..vN.metadata.json` (N the newest there is); with Glue (glue.ts), the files the table's
 * metadata log names, ending with the one Glue's pointer names (a commit that lost its race
 * leaves a metadata file no chain holds: that is no table's history). Keys in the bucket; a
 * file that is missing keeps its key, for the chain check to report.
 */
import { parseJson } from '../../shared/iceberg/json.js';
import type { TableMetadata } from '../../shared/iceberg/types.js';
import { ICEBERG_ROOT } from '../../shared/layout.js';
import { glueOf } from './glue.js';
import type { SimS3 } from './s3.js';

/** The bucket's root as the storage names it (`S3Storage.location`, actors.ts). */
export const ROOT = 's3://sim-bucket/';
const VERSION = /^v(\d+)\.metadata\.json$/;

/** A file's key from its location, or undefined when it is not in the bucket. */
export const keyOf = (location: string): string | undefined =>
  location.startsWith(ROOT) ? location.slice(ROOT.length) : undefined;

export function metadataChain(s3: SimS3, table: string): string[] {
  const glue = glueOf(s3);
  if (glue) {
    const pointer = glue.pointer(table);
    const key = pointer === undefined ? undefined : keyOf(pointer);
    if (key === undefined) return [];
    const body = s3.peek(key);
    if (!body) return [key];
    let metadata: TableMetadata;
    try {
      metadata = parseJson(Buffer.from(body).toString('utf8')) as TableMetadata;
    } catch {
      return [key];
    }
    const logged = (metadata['metadata-log'] ?? []).map(
      (e) => keyOf(e['metadata-file']) ?? e['metadata-file'],
    );
    return [...logged, key];
  }
  const prefix = `${ICEBERG_ROOT}/${table}/metadata/`;
  const versions = s3
    .keys(prefix)
    .map((k) => VERSION.exec(k.slice(prefix.length)))
    .filter((m) => m !== null)
    .map((m) => Number(m[1]));
  if (versions.length === 0) return [];
  return Array.from({ length: Math.max(...versions) }, (_, i) => `${prefix}v${i + 1}.metadata.json`);
}

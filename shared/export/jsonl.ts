/**
 * The raw JSON Lines files (CONTRACT.md, "Raw lines"): one JSON document per line, gzip.
 * Lossless: a line is `JSON.stringify` of what it was given, so parsing it back deep-equals it.
 */
import { gzipSync, constants as zlibConstants } from 'node:zlib';
import { ExporterError } from '../errors.js';

/** zlib's default level: raw files are the archive of record, size matters more than speed. */
const GZIP_LEVEL = zlibConstants.Z_DEFAULT_COMPRESSION;

/**
 * Encodes `lines` as gzip JSON Lines: `JSON.stringify(line) + '\n'` for each, compressed
 * as one gzip member. Throws an `ExporterError` for a value JSON cannot represent.
 *
 * @example
 * const bytes = encodeJsonLinesGzip(items.map((data) => ({ run_id, fetched_at, data })));
 */
export function encodeJsonLinesGzip(lines: readonly unknown[]): Uint8Array {
  const texts: string[] = new Array(lines.length);
  for (let i = 0; i < lines.length; i++) {
    let text: string | undefined;
    try {
      text = JSON.stringify(lines[i]);
    } catch (cause) {
      throw new ExporterError(`JSON Lines: line ${i} cannot be written as JSON`, { cause });
    }
    if (text === undefined) throw new ExporterError(`JSON Lines: line ${i} is not a JSON value`);
    texts[i] = text;
  }
  const body = texts.length === 0 ? '' : `${texts.join('\n')}\n`;
  return gzipSync(body, { level: GZIP_LEVEL });
}

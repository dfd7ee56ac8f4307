/**
 * The raw JSON Lines files (CONTRACT.md, "Raw lines"): one JSON document per line, gzip.
 * Lossless: a line is `JSON.stringify` of what it was given, so parsing it back deep-equals it.
 */
import { gzipSync, constants as zlibConstants } from 'node:zlib';
import { ExporterError } from '../errors.js';

/** zlib's default level: raw files are the archive of record, size matters more than speed. */
const GZIP_LEVEL = zlibConstants.Z_DEFAULT_COMPRESSION;

/**
 * Lines of one file, serialised as they are added: a batch holds compact JSON text instead
 * of the object graphs it came from, which can be several times larger.
 *
 * @example
 * const raw = new JsonLinesBuffer();
 * raw.add({ run_id, fetched_at, data });
 * const bytes = raw.encodeGzip();
 */
export class JsonLinesBuffer {
  readonly #texts: string[] = [];

  /** Serialises one line now; throws an `ExporterError` for a value JSON cannot represent. */
  add(line: unknown): void {
    const index = this.#texts.length;
    let text: string | undefined;
    try {
      text = JSON.stringify(line);
    } catch (cause) {
      throw new ExporterError(`JSON Lines: line ${index} cannot be written as JSON`, { cause });
    }
    if (text === undefined) throw new ExporterError(`JSON Lines: line ${index} is not a JSON value`);
    this.#texts.push(text);
  }

  get length(): number {
    return this.#texts.length;
  }

  /** `line + '\n'` for each line, compressed as one gzip member. */
  encodeGzip(): Uint8Array {
    const body = this.#texts.length === 0 ? '' : `${this.#texts.join('\n')}\n`;
    return gzipSync(body, { level: GZIP_LEVEL });
  }
}

/**
 * Encodes `lines` as gzip JSON Lines: `JSON.stringify(line) + '\n'` for each, compressed
 * as one gzip member. Throws an `ExporterError` for a value JSON cannot represent.
 *
 * @example
 * const bytes = encodeJsonLinesGzip(items.map((data) => ({ run_id, fetched_at, data })));
 */
export function encodeJsonLinesGzip(lines: readonly unknown[]): Uint8Array {
  const buffer = new JsonLinesBuffer();
  for (const line of lines) buffer.add(line);
  return buffer.encodeGzip();
}

/**
 * The raw JSON Lines files (docs/ingest.md#output-layout): one JSON document per line, gzip.
 * Lossless: a line is `JSON.stringify` of what it was given, so parsing it back deep-equals it.
 */
import { gzipSync, constants as zlibConstants } from 'node:zlib';
import { ExporterError } from '../../errors.js';

/** zlib's default level: raw files are the archive of record, size matters more than speed. */
const GZIP_LEVEL = zlibConstants.Z_DEFAULT_COMPRESSION;

/**
 * Text compressed into one gzip member at a time. A file of several members is one valid gzip
 * stream (RFC 1952; gunzip, Node, DuckDB and Athena's readers take it), and a batch then holds
 * its raw lines compressed, about a seventh of their text, instead of all of it.
 */
const MEMBER_TEXT_CHARS = 1 << 20;

/**
 * Lines of one file, serialised and compressed as they are added.
 *
 * @example
 * const raw = new JsonLinesBuffer();
 * raw.add({ run_id, fetched_at, data });
 * const bytes = raw.encodeGzip();
 */
export class JsonLinesBuffer {
  readonly #members: Buffer[] = [];
  #pending: string[] = [];
  #pendingChars = 0;
  #count = 0;

  /**
   * Serialises one line now; throws an `ExporterError` for a value JSON cannot represent (or
   * nested too deep for JSON.stringify). All or nothing: a line that throws leaves the buffer
   * as it was, so a caller can skip it and go on.
   */
  add(line: unknown): void {
    let text: string | undefined;
    try {
      text = JSON.stringify(line);
    } catch (cause) {
      throw new ExporterError(`JSON Lines: line ${this.#count} cannot be written as JSON`, { cause });
    }
    if (text === undefined) throw new ExporterError(`JSON Lines: line ${this.#count} is not a JSON value`);
    // Compress the lines before this one first: nothing can fail once the line is counted.
    if (this.#pendingChars + text.length + 1 > MEMBER_TEXT_CHARS) this.#flush();
    this.#pending.push(text);
    this.#pendingChars += text.length + 1;
    this.#count++;
  }

  get length(): number {
    return this.#count;
  }

  /** `line + '\n'` for each line, gzip (one member per ~1 MiB of text). */
  encodeGzip(): Uint8Array {
    this.#flush();
    if (this.#members.length === 0) return gzipSync('', { level: GZIP_LEVEL });
    return this.#members.length === 1 ? this.#members[0]! : Buffer.concat(this.#members);
  }

  #flush(): void {
    if (this.#pending.length === 0) return;
    this.#members.push(gzipSync(`${this.#pending.join('\n')}\n`, { level: GZIP_LEVEL }));
    this.#pending = [];
    this.#pendingChars = 0;
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

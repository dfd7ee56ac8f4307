/**
 * Several Parquet files of one schema → one file, without decoding: each input's row groups
 * (column chunks, pages and all) are copied as they are, the offsets in their metadata moved
 * to where the bytes land, and one footer lists every row group. Statistics, encodings and
 * page layout are kept byte for byte, so the output reads exactly as the inputs one after the
 * other. It streams: each input is handed over whole and its bytes returned for the caller to
 * write; only the footers' row-group metadata is kept, as its compact-protocol bytes (about
 * 1.5 KB per row group of a 20-column table, where the decoded structs took 30 times that).
 */
import { ExporterError } from '../errors.js';
import {
  CHUNK,
  equalBytes,
  FILE,
  type Footer,
  MAGIC,
  META,
  ROW_GROUP,
  readFooter,
  schemaDifference,
  schemaEntries,
} from './footer.js';
import { EncodedStruct, type ThriftList, type ThriftStruct, ThriftWriter, TType } from './thrift.js';

export interface ParquetConcatOptions {
  /** The output's `created_by`; default the first input's (the writer its statistics come from). */
  createdBy?: string;
}

/** The offsets into the file a column chunk's metadata may hold, which move with its bytes. */
const CHUNK_OFFSETS = [CHUNK.columnIndexOffset] as const;
const META_OFFSETS = [
  META.dataPageOffset,
  META.indexPageOffset,
  META.dictionaryPageOffset,
  META.bloomFilterOffset,
] as const;

/**
 * Concatenates Parquet files of an identical schema into one, streaming: `start()`, then
 * `append()` each whole input file in order, then `finish()`; write every returned chunk to
 * the output, in order. Inputs may be files of any writer that keeps its data between the
 * magic and the footer, without offset indexes (their page locations would need rewriting) or
 * encryption; our encoder's files qualify.
 *
 * @example
 * const concat = new ParquetConcat();
 * const out = createWriteStream('questions.parquet');
 * out.write(concat.start());
 * for (const path of inputs) out.write(concat.append(await readFile(path)));
 * out.end(concat.finish());
 */
export class ParquetConcat {
  readonly #createdBy: string | undefined;
  #first: { metadata: ThriftStruct; schemaBytes: Uint8Array } | undefined;
  readonly #rowGroups: EncodedStruct[] = [];
  #files = 0;
  #rows = 0n;
  #bytes = 0;
  #state: 'new' | 'started' | 'finished' = 'new';

  constructor(options: ParquetConcatOptions = {}) {
    this.#createdBy = options.createdBy;
  }

  /** Rows appended so far. */
  get rows(): number {
    return Number(this.#rows);
  }

  /** Output bytes returned so far (the start, the appended data, and the footer once finished). */
  get bytes(): number {
    return this.#bytes;
  }

  /** The bytes that start the output file ('PAR1'). Call once, first. */
  start(): Uint8Array {
    this.#expect('new', 'start() comes first, once');
    this.#state = 'started';
    this.#bytes = MAGIC.length;
    return MAGIC.slice();
  }

  /**
   * Adds one whole Parquet file's row groups. Returns the bytes to write next: a view into
   * `file` (its row groups), valid as long as `file` is. Throws an `ExporterError` when `file`
   * is not a Parquet file, its schema differs from the first file's (the message says how), or
   * it holds what cannot be moved (offset indexes, encryption, column chunks in other files).
   */
  append(file: Uint8Array): Uint8Array {
    this.#expect('started', 'append() comes between start() and finish()');
    const index = this.#files;
    let footer: Footer;
    try {
      footer = readFooter(file);
    } catch (error) {
      throw new ExporterError(`parquet concat, file ${index}: ${(error as Error).message}`, { cause: error });
    }
    const { metadata, schemaBytes, dataEnd } = footer;
    const refuse = (why: string) => new ExporterError(`parquet concat, file ${index}: ${why}`);
    if (metadata.get(FILE.encryptionAlgorithm) !== undefined) throw refuse('it is encrypted');
    // Equal bytes are the common case; otherwise the schemas are compared element by element.
    if (this.#first && !equalBytes(this.#first.schemaBytes, schemaBytes)) {
      const difference = schemaDifference(schemaEntries(this.#first.metadata), schemaEntries(metadata));
      if (difference) {
        throw new ExporterError(
          `parquet concat, file ${index}: its schema differs from the first file's: ${difference}`,
          {
            hint: 'concatenate only files written with one table definition; write the others to another file',
          },
        );
      }
    }

    // Byte 4 of this file (its first after the magic) lands at the output's current end.
    const shift = BigInt(this.#bytes - MAGIC.length);
    const moved = (value: bigint | undefined, what: string, end = dataEnd): bigint | undefined => {
      if (value === undefined) return undefined;
      if (value < BigInt(MAGIC.length) || value > BigInt(end)) {
        throw refuse(`${what} ${value} lies outside its data [4, ${dataEnd})`);
      }
      return value + shift;
    };
    const rowGroups: EncodedStruct[] = [];
    let rows = 0n;
    for (const group of (metadata.list(FILE.rowGroups) ?? []) as ThriftStruct[]) {
      const copy = group.clone();
      const chunks = ((group.list(ROW_GROUP.columns) ?? []) as ThriftStruct[]).map((chunk) => {
        if (chunk.get(CHUNK.filePath) !== undefined) throw refuse('a column chunk lives in another file');
        if (chunk.get(CHUNK.offsetIndexOffset) !== undefined) {
          throw refuse('it has offset indexes (their page offsets would need rewriting): write it without');
        }
        if (chunk.get(CHUNK.cryptoMetadata) !== undefined || chunk.get(CHUNK.encryptedColumnMetadata)) {
          throw refuse('a column is encrypted');
        }
        const out = chunk.clone();
        // The deprecated chunk file_offset: writers put the chunk's start or end there, or 0.
        const fileOffset = chunk.i64(CHUNK.fileOffset);
        if (fileOffset) out.set(CHUNK.fileOffset, TType.I64, moved(fileOffset, 'a column chunk offset')!);
        for (const id of CHUNK_OFFSETS) {
          const value = moved(chunk.i64(id), 'an index offset');
          if (value !== undefined) out.set(id, TType.I64, value);
        }
        const meta = chunk.struct(CHUNK.metaData);
        if (!meta) throw refuse('a column chunk has no metadata');
        const metaOut = meta.clone();
        for (const id of META_OFFSETS) {
          const value = moved(meta.i64(id), 'a page offset', dataEnd - 1);
          if (value !== undefined) metaOut.set(id, TType.I64, value);
        }
        out.set(CHUNK.metaData, TType.STRUCT, metaOut);
        return out;
      });
      copy.set(ROW_GROUP.columns, TType.LIST, { elementType: TType.STRUCT, items: chunks });
      const fileOffset = group.i64(ROW_GROUP.fileOffset);
      if (fileOffset !== undefined) {
        copy.set(ROW_GROUP.fileOffset, TType.I64, moved(fileOffset, 'a row group offset')!);
      }
      // The ordinal (used with encryption) is the group's position in the output.
      if (group.get(ROW_GROUP.ordinal) !== undefined) {
        copy.set(ROW_GROUP.ordinal, TType.I16, this.#rowGroups.length + rowGroups.length);
      }
      rows += group.i64(ROW_GROUP.numRows) ?? 0n;
      rowGroups.push(EncodedStruct.of(copy));
    }
    const declared = metadata.i64(FILE.numRows) ?? 0n;
    if (declared !== rows) throw refuse(`its footer says ${declared} rows, its row groups hold ${rows}`);

    // Checked in full before anything is kept: a refused file leaves the output as it was.
    this.#first ??= { metadata, schemaBytes };
    this.#rowGroups.push(...rowGroups);
    this.#rows += rows;
    this.#files++;
    const data = file.subarray(MAGIC.length, dataEnd);
    this.#bytes += data.length;
    return data;
  }

  /**
   * The footer and magic that end the output. Throws an `ExporterError` when no rows were
   * appended (a file without rows is not written: see `encodeParquetColumns`).
   */
  finish(): Uint8Array {
    this.#expect('started', 'finish() comes after start(), once');
    if (!this.#first || this.#rows === 0n) {
      throw new ExporterError(
        `parquet concat: no rows in ${this.#files} file(s); a Parquet file needs at least one`,
      );
    }
    this.#state = 'finished';
    const metadata = this.#first.metadata.clone();
    metadata.set(FILE.numRows, TType.I64, this.#rows);
    const list: ThriftList = { elementType: TType.STRUCT, items: this.#rowGroups };
    metadata.set(FILE.rowGroups, TType.LIST, list);
    if (this.#createdBy !== undefined) {
      metadata.set(FILE.createdBy, TType.BINARY, Buffer.from(this.#createdBy, 'utf8'));
    }
    const writer = new ThriftWriter(64 * 1024);
    writer.struct(metadata);
    const length = Buffer.alloc(4);
    length.writeUInt32LE(writer.length);
    writer.raw(length);
    writer.raw(MAGIC);
    const footer = writer.bytes().slice();
    this.#bytes += footer.length;
    return footer;
  }

  #expect(state: 'new' | 'started', order: string): void {
    if (this.#state !== state) throw new ExporterError(`parquet concat: ${order}`);
  }
}

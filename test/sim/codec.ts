/**
 * Two seams of the codecs while a seed runs.
 *
 * Speed: while a seed runs, `zlib.zstdCompressSync` (the Parquet column
 * codec of shared/parquet/column.ts) writes zstd frames of raw, uncompressed blocks. They are
 * valid zstd (RFC 8878: any reader, hyparquet's and DuckDB's included, decompresses them); only
 * the compression is skipped. Real compression allocates a context per column chunk, and that
 * native memory and the GC it triggered were a third of a seed's time; the lifecycle does not
 * depend on the bytes' size.
 *
 * Determinism: avsc deflates and inflates the blocks of Iceberg's Avro manifests with zlib's
 * asynchronous `deflateRaw`/`inflateRaw`, which run on libuv's thread pool: their callbacks come
 * at a real time the scheduler does not see (it may fire the next operation first), so a seed
 * would not replay. While a seed runs they are the synchronous calls, answered on the next
 * tick; deflate stores its blocks (level 0: valid deflate, only not compressed, as with zstd).
 *
 * Speed again: avsc's decoder builds a Type from each Avro file's header schema, and a resolver
 * from it to the reader's Type, for every file it reads; for Iceberg's manifests (a commit reads
 * the current manifest list, the invariants every manifest) that was most of an Iceberg seed's
 * extra time. While a seed runs, both are built once per schema text and per pair of Types
 * (Types and resolvers are immutable; calls with options, the product's own, are left alone).
 */
import { syncBuiltinESMExports } from 'node:module';
import zlib from 'node:zlib';
import avro from 'avsc';

/** zstd's largest block. */
const MAX_BLOCK = 128 * 1024;

/** A zstd frame holding `input` in raw blocks (single segment, 4-byte content size). */
export function rawZstdFrame(input: Uint8Array): Buffer {
  const blocks = Math.max(1, Math.ceil(input.byteLength / MAX_BLOCK));
  const out = Buffer.allocUnsafe(4 + 1 + 4 + blocks * 3 + input.byteLength);
  out.writeUInt32LE(0xfd2fb528, 0); // magic
  out[4] = (2 << 6) | (1 << 5); // Frame_Content_Size on 4 bytes, Single_Segment
  out.writeUInt32LE(input.byteLength, 5);
  let at = 9;
  for (let b = 0; b < blocks; b++) {
    const start = b * MAX_BLOCK;
    const size = Math.min(MAX_BLOCK, input.byteLength - start);
    const last = b === blocks - 1 ? 1 : 0;
    const header = last | (0 << 1) | (size << 3); // Block_Type 0: raw
    out[at] = header & 0xff;
    out[at + 1] = (header >>> 8) & 0xff;
    out[at + 2] = (header >>> 16) & 0xff;
    at += 3;
    out.set(input.subarray(start, start + size), at);
    at += size;
  }
  return out;
}

const toBytes = (input: unknown): Uint8Array => {
  if (input instanceof Uint8Array) return input;
  if (typeof input === 'string') return Buffer.from(input);
  if (input instanceof ArrayBuffer) return new Uint8Array(input);
  if (ArrayBuffer.isView(input)) return new Uint8Array(input.buffer, input.byteOffset, input.byteLength);
  throw new TypeError('zstd input must be bytes');
};

/** Swaps in the raw-frame codec; returns the function that puts the real one back. */
export function installFastZstd(): () => void {
  const real = zlib.zstdCompressSync;
  const mutable = zlib as unknown as { zstdCompressSync: (input: unknown) => Buffer };
  mutable.zstdCompressSync = (input: unknown) => rawZstdFrame(toBytes(input));
  syncBuiltinESMExports();
  return () => {
    mutable.zstdCompressSync = real as unknown as (input: unknown) => Buffer;
    syncBuiltinESMExports();
  };
}

type AvroCodec = (buf: Buffer, cb: (error: Error | null, out?: Buffer) => void) => void;
type CodecHolder = { getDefaultCodecs: () => Record<string, AvroCodec> };

const syncCodec =
  (fn: (buf: Buffer) => Buffer): AvroCodec =>
  (buf, cb) => {
    let out: Buffer;
    try {
      out = fn(buf);
    } catch (error) {
      process.nextTick(cb, error as Error);
      return;
    }
    process.nextTick(cb, null, out);
  };

/** Swaps in synchronous Avro block codecs; returns the function that puts the real ones back. */
export function installSyncAvroCodecs(): () => void {
  const encoder = avro.streams.BlockEncoder as unknown as CodecHolder;
  const decoder = avro.streams.BlockDecoder as unknown as CodecHolder;
  const real = { encoder: encoder.getDefaultCodecs, decoder: decoder.getDefaultCodecs };
  encoder.getDefaultCodecs = () => ({
    ...real.encoder(),
    deflate: syncCodec((b) => zlib.deflateRawSync(b, { level: 0 })),
  });
  decoder.getDefaultCodecs = () => ({ ...real.decoder(), deflate: syncCodec((b) => zlib.inflateRawSync(b)) });
  return () => {
    encoder.getDefaultCodecs = real.encoder;
    decoder.getDefaultCodecs = real.decoder;
  };
}

interface AvroTypeStatics {
  forSchema: (schema: unknown, opts?: unknown) => avro.Type;
  isType: (value: unknown) => boolean;
  prototype: { createResolver: (this: avro.Type, type: avro.Type, opts?: unknown) => unknown };
}

/** Types by schema text, and resolvers by reader and writer Type: kept from seed to seed. */
const types = new Map<string, avro.Type>();
const resolvers = new WeakMap<avro.Type, WeakMap<avro.Type, unknown>>();

/** Builds avsc's Types and resolvers once per schema; returns the function that undoes it. */
export function installAvroTypeCache(): () => void {
  const Type = avro.Type as unknown as AvroTypeStatics;
  const real = { forSchema: Type.forSchema, createResolver: Type.prototype.createResolver };
  Type.forSchema = function (this: unknown, schema: unknown, opts?: unknown) {
    if (opts !== undefined || schema === null || typeof schema !== 'object' || Type.isType(schema))
      return real.forSchema.call(this, schema, opts);
    const key = JSON.stringify(schema);
    let type = types.get(key);
    if (!type) {
      type = real.forSchema.call(this, schema);
      types.set(key, type);
    }
    return type;
  };
  Type.prototype.createResolver = function (this: avro.Type, writer: avro.Type, opts?: unknown) {
    if (opts !== undefined) return real.createResolver.call(this, writer, opts);
    const byWriter = resolvers.get(this) ?? new WeakMap<avro.Type, unknown>();
    resolvers.set(this, byWriter);
    if (!byWriter.has(writer)) byWriter.set(writer, real.createResolver.call(this, writer));
    return byWriter.get(writer);
  };
  return () => {
    Type.forSchema = real.forSchema;
    Type.prototype.createResolver = real.createResolver;
  };
}

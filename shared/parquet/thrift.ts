/**
 * Thrift compact protocol, read and written back byte for byte: every value keeps its wire
 * type, so a footer read, patched (offsets) and written again differs only where patched.
 * hyparquet's reader turns statistics into JS values and hyparquet-writer's writer infers
 * wire types from JS values (an i16 becomes an i32, a cut string bound is decoded as text);
 * neither round-trips exactly, which concatenation needs.
 */
import { ExporterError } from '../errors.js';
import { ByteSink } from './bytes.js';

/** Compact protocol wire types. */
export const TType = {
  STOP: 0,
  TRUE: 1,
  FALSE: 2,
  BYTE: 3,
  I16: 4,
  I32: 5,
  I64: 6,
  DOUBLE: 7,
  BINARY: 8,
  LIST: 9,
  SET: 10,
  MAP: 11,
  STRUCT: 12,
} as const;

/** A list or set: its element wire type and items. */
export interface ThriftList {
  elementType: number;
  items: ThriftValue[];
}

/**
 * BYTE, I16, I32 and DOUBLE are numbers; I64 a number while exact, else a bigint (read it with
 * {@link ThriftStruct.i64}); BINARY bytes; bool a boolean.
 */
export type ThriftValue = boolean | number | bigint | Uint8Array | ThriftList | ThriftStruct | EncodedStruct;

/**
 * A struct already written in the compact protocol, kept as its bytes: far smaller in memory
 * than its {@link ThriftStruct}, and written out as is.
 */
export class EncodedStruct {
  constructor(readonly bytes: Uint8Array) {}

  /** Writes `struct` into new bytes of its own (no view into anything read). */
  static of(struct: ThriftStruct): EncodedStruct {
    const writer = new ThriftWriter(1024);
    writer.struct(struct);
    return new EncodedStruct(writer.bytes().slice());
  }
}

/** A struct: fields by id, each with its wire type. */
export class ThriftStruct {
  readonly fields = new Map<number, { type: number; value: ThriftValue }>();

  get(id: number): ThriftValue | undefined {
    return this.fields.get(id)?.value;
  }

  /** Field `id` when it is a struct. */
  struct(id: number): ThriftStruct | undefined {
    const value = this.get(id);
    return value instanceof ThriftStruct ? value : undefined;
  }

  /** Field `id` when it is a list (or set). */
  list(id: number): ThriftValue[] | undefined {
    const field = this.fields.get(id);
    return field && (field.type === TType.LIST || field.type === TType.SET)
      ? (field.value as ThriftList).items
      : undefined;
  }

  /** Field `id` when it is an i64. */
  i64(id: number): bigint | undefined {
    const field = this.fields.get(id);
    return field?.type === TType.I64 ? BigInt(field.value as number | bigint) : undefined;
  }

  set(id: number, type: number, value: ThriftValue): void {
    this.fields.set(id, { type, value });
  }

  /** A copy of this struct, one level deep (nested values are shared). */
  clone(): ThriftStruct {
    const copy = new ThriftStruct();
    for (const [id, field] of this.fields) copy.fields.set(id, { ...field });
    return copy;
  }
}

/** Largest magnitude whose zigzag form (2|v|) is still an exact number. */
const MAX_ZIGZAG_NUMBER = 2 ** 51;

const malformed = (what: string) => new ExporterError(`malformed thrift: ${what}`);

/** Reads compact-protocol values from `bytes`, starting at `offset`. */
export class ThriftReader {
  offset: number;
  readonly #bytes: Uint8Array;
  readonly #view: DataView;

  constructor(bytes: Uint8Array, offset = 0) {
    this.#bytes = bytes;
    this.#view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.offset = offset;
  }

  #byte(): number {
    if (this.offset >= this.#bytes.length) throw malformed('unexpected end');
    return this.#bytes[this.offset++]!;
  }

  /** An unsigned varint: a number up to 49 bits (always exact), a bigint beyond. */
  #varint(): number | bigint {
    let result = 0;
    let scale = 1;
    for (let i = 0; i < 7; i++) {
      const b = this.#byte();
      result += (b & 0x7f) * scale;
      if (!(b & 0x80)) return result;
      scale *= 128;
    }
    // More than 49 bits: go on in bigint (rare: only i64 values near the ends of their range).
    let big = BigInt(result);
    let shift = 49n;
    for (;;) {
      const b = this.#byte();
      big |= BigInt(b & 0x7f) << shift;
      if (!(b & 0x80)) return big;
      shift += 7n;
      if (shift > 70n) throw malformed('varint too long');
    }
  }

  #zigzag(): number | bigint {
    const v = this.#varint();
    if (typeof v === 'bigint') return (v >> 1n) ^ -(v & 1n);
    return v % 2 === 0 ? v / 2 : -(v + 1) / 2;
  }

  #length(): number {
    const n = Number(this.#varint());
    if (this.offset + n > this.#bytes.length) throw malformed(`length ${n} past the end`);
    return n;
  }

  /** Reads a struct; `spans`, when given, receives the byte range of each field's value. */
  struct(spans?: Map<number, [start: number, end: number]>): ThriftStruct {
    const struct = new ThriftStruct();
    let id = 0;
    for (;;) {
      const header = this.#byte();
      const type = header & 0x0f;
      if (type === TType.STOP) return struct;
      const delta = header >> 4;
      id = delta ? id + delta : Number(this.#zigzag());
      const start = this.offset;
      const value = type === TType.TRUE || type === TType.FALSE ? type === TType.TRUE : this.value(type);
      struct.set(id, type, value);
      spans?.set(id, [start, this.offset]);
    }
  }

  value(type: number): ThriftValue {
    switch (type) {
      case TType.BYTE:
        return this.#view.getInt8(this.offset++);
      case TType.I16:
      case TType.I32:
        return Number(this.#zigzag());
      case TType.I64:
        return this.#zigzag(); // a number while exact: most are small (sizes, offsets, counts)
      case TType.DOUBLE: {
        if (this.offset + 8 > this.#bytes.length) throw malformed('unexpected end');
        const v = this.#view.getFloat64(this.offset, true);
        this.offset += 8;
        return v;
      }
      case TType.BINARY: {
        const n = this.#length();
        this.offset += n;
        return this.#bytes.subarray(this.offset - n, this.offset);
      }
      case TType.LIST:
      case TType.SET: {
        const header = this.#byte();
        const elementType = header & 0x0f;
        const size = header >> 4 === 15 ? Number(this.#varint()) : header >> 4;
        const items: ThriftValue[] = [];
        for (let i = 0; i < size; i++) {
          // A bool element is one byte: 1 true, anything else (2 by the spec) false.
          items.push(
            elementType === TType.TRUE || elementType === TType.FALSE
              ? this.#byte() === 1
              : this.value(elementType),
          );
        }
        return { elementType, items };
      }
      case TType.STRUCT:
        return this.struct();
      default:
        throw malformed(`wire type ${type} (maps are not used by Parquet)`);
    }
  }
}

type Fields = ThriftStruct['fields'];

/** The fields by ascending id, as the compact protocol's deltas need (usually as they are). */
function inIdOrder(fields: Fields): Iterable<[number, { type: number; value: ThriftValue }]> {
  let last = -Infinity;
  for (const id of fields.keys()) {
    if (id < last) return [...fields].sort(([a], [b]) => a - b);
    last = id;
  }
  return fields;
}

/** Writes compact-protocol values. */
export class ThriftWriter {
  readonly #out: ByteSink;

  constructor(initialBytes = 4096) {
    this.#out = new ByteSink(initialBytes);
  }

  get length(): number {
    return this.#out.length;
  }

  /** The bytes written so far (a view: copy it before the next write if you keep it). */
  bytes(): Uint8Array {
    return this.#out.view8();
  }

  /** Appends raw bytes (not thrift: a length, a magic). */
  raw(bytes: Uint8Array): void {
    this.#out.append(bytes);
  }

  /** An unsigned varint from a number (exact, so below 2^53) or a bigint. */
  #varint(value: number | bigint): void {
    if (typeof value === 'number') {
      let v = value;
      while (v >= 0x80) {
        this.#out.u8((v % 0x80) | 0x80);
        v = Math.floor(v / 0x80);
      }
      this.#out.u8(v);
      return;
    }
    let v = value;
    while (v > 0x7fn) {
      this.#out.u8(Number(v & 0x7fn) | 0x80);
      v >>= 7n;
    }
    this.#out.u8(Number(v));
  }

  #zigzag(value: number | bigint): void {
    if (typeof value === 'number' && Math.abs(value) <= MAX_ZIGZAG_NUMBER) {
      this.#varint(value >= 0 ? value * 2 : -value * 2 - 1);
    } else {
      const v = BigInt(value);
      this.#varint(BigInt.asUintN(64, (v << 1n) ^ (v >> 63n)));
    }
  }

  struct(struct: ThriftStruct): void {
    let last = 0;
    for (const [id, { type, value }] of inIdOrder(struct.fields)) {
      const wire = type === TType.TRUE || type === TType.FALSE ? (value ? TType.TRUE : TType.FALSE) : type;
      const delta = id - last;
      if (delta > 0 && delta <= 15) {
        this.#out.u8((delta << 4) | wire);
      } else {
        this.#out.u8(wire);
        this.#zigzag(id);
      }
      if (wire !== TType.TRUE && wire !== TType.FALSE) this.value(type, value);
      last = id;
    }
    this.#out.u8(TType.STOP);
  }

  value(type: number, value: ThriftValue): void {
    switch (type) {
      case TType.BYTE:
        this.#out.u8((value as number) & 0xff);
        return;
      case TType.I16:
      case TType.I32:
      case TType.I64:
        this.#zigzag(value as number | bigint);
        return;
      case TType.DOUBLE: {
        const bytes = new Uint8Array(8);
        new DataView(bytes.buffer).setFloat64(0, value as number, true);
        this.#out.append(bytes);
        return;
      }
      case TType.BINARY:
        this.#varint((value as Uint8Array).length);
        this.#out.append(value as Uint8Array);
        return;
      case TType.LIST:
      case TType.SET: {
        const { elementType, items } = value as ThriftList;
        if (items.length < 15) {
          this.#out.u8((items.length << 4) | elementType);
        } else {
          this.#out.u8(0xf0 | elementType);
          this.#varint(items.length);
        }
        for (const item of items) {
          if (elementType === TType.TRUE || elementType === TType.FALSE) this.#out.u8(item ? 1 : 2);
          else this.value(elementType, item);
        }
        return;
      }
      case TType.STRUCT:
        if (value instanceof EncodedStruct) this.#out.append(value.bytes);
        else this.struct(value as ThriftStruct);
        return;
      default:
        throw malformed(`wire type ${type}`);
    }
  }
}

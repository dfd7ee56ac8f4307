import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ColumnBuffer, cellProblem, encodeParquetColumns } from '../../../shared/parquet/encode.js';
import type { Cell, ColumnType, ParquetColumn } from '../../../shared/parquet/schema.js';

const TYPES: ColumnType[] = ['string', 'int', 'bigint', 'boolean', 'timestamp', 'array<string>'];

/** Cells at the edges of what some column takes. */
const EDGES: unknown[] = [
  null,
  undefined,
  '',
  -0,
  1.5,
  Number.NaN,
  Number.POSITIVE_INFINITY,
  2 ** 31 - 1,
  2 ** 31,
  -(2 ** 31),
  -(2 ** 31) - 1,
  2 ** 53 - 1,
  2 ** 53,
  true,
  new Date(0),
  new Date(Number.NaN),
  [],
  [null],
  [undefined, 'a'],
  [1],
  {},
];

/** Cells of every kind, right and wrong for each column type. */
const cellArb: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom(...EDGES),
  fc.string(),
  fc.integer(),
  fc.double(),
  fc.maxSafeInteger(),
  fc.boolean(),
  fc.date(),
  fc.constant(new Date(Number.NaN)),
  fc.array(fc.oneof(fc.string(), fc.constant(null), fc.constant(undefined), fc.integer(), fc.boolean())),
  fc.object(),
);

const encodes = (column: ParquetColumn, cell: unknown): boolean => {
  try {
    encodeParquetColumns({ name: 't', columns: [column] }, [[cell as Cell]]);
    return true;
  } catch {
    // Refused: what the property compares against cellProblem.
    return false;
  }
};

describe('cellProblem', () => {
  it('refuses exactly the edge cells the encoder refuses, for every column type and nullability', () => {
    for (const type of TYPES) {
      for (const nullable of [false, true]) {
        const column: ParquetColumn = { name: 'c', type, nullable };
        for (const cell of EDGES) {
          const label = `${type}${nullable ? ' (nullable)' : ''}: ${String(cell)}`;
          expect(cellProblem(column, cell as Cell) === undefined, label).toBe(encodes(column, cell));
        }
      }
    }
  });

  it('refuses exactly the cells the encoder refuses, for every column type and nullability', () => {
    fc.assert(
      fc.property(fc.constantFrom(...TYPES), fc.boolean(), cellArb, (type, nullable, cell) => {
        const column: ParquetColumn = { name: 'c', type, nullable };
        expect(cellProblem(column, cell as Cell) === undefined).toBe(encodes(column, cell));
      }),
      { numRuns: 2_000 },
    );
  });
});

describe('ColumnBuffer.check', () => {
  it('names the table, column and row of the first refused cell from a row on', () => {
    const buffer = new ColumnBuffer({
      name: 'people',
      columns: [
        { name: 'name', type: 'string', nullable: false },
        { name: 'age', type: 'int', nullable: true },
      ],
    });
    buffer.add({ name: 'a', age: 2 ** 40 });
    buffer.add({ name: 'b', age: 3 });
    buffer.add({ name: 'c', age: 'four' as unknown as number });
    expect(() => buffer.check()).toThrow(
      'parquet table people, column age, row 0: expected a 32-bit integer, got 1099511627776',
    );
    expect(() => buffer.check(1)).toThrow(
      'parquet table people, column age, row 2: expected a 32-bit integer, got string',
    );
  });

  it('truncates every column to the same length, even after a row added part way', () => {
    const buffer = new ColumnBuffer({
      name: 't',
      columns: [
        { name: 'a', type: 'string', nullable: false },
        { name: 'b', type: 'string', nullable: false },
      ],
    });
    buffer.add({ a: 'x', b: 'y' });
    buffer.columns[0]!.push('half a row');
    buffer.truncate(1);
    expect(buffer.columns.map((c) => c.length)).toEqual([1, 1]);
    buffer.truncate(5);
    expect(buffer.columns.map((c) => c.length)).toEqual([1, 1]);
  });
});

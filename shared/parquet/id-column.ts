/**
 * One row group's integer column (`job_id`, `campaign_id`) as numbers, decoded page by page with
 * hyparquet's own page readers but without its row assembly. `parquetRead` turns every value of
 * an INT64 column into a BigInt (a dictionary page's values are looked up row by row into an
 * array of BigInts), and the caller then converts each to a number: at 75 rows a report in
 * `questions_current` that was most of a `_current` commit's CPU (BENCHMARKS.md, "The lake's
 * curve"). Here a dictionary is converted to numbers once and each row is one typed-array read.
 * Every encoding hyparquet reads is read (PLAIN, dictionary, delta; data pages v1 and v2), so a
 * file rewritten by an engine's compaction reads the same; a null reads as 0, as `Number(null)`
 * did before.
 */
import type { AsyncBuffer, Compressors, DataReader, FileMetaData, RowGroup } from 'hyparquet';
import { parquetSchema } from 'hyparquet';
import { parquetHeader } from 'hyparquet/src/column.js';
import { DEFAULT_PARSERS } from 'hyparquet/src/convert.js';
import { decompressPage, readDataPage, readDataPageV2 } from 'hyparquet/src/datapage.js';
import { readPlain } from 'hyparquet/src/plain.js';
import { getMaxDefinitionLevel, getTreePath, isFlatColumn } from 'hyparquet/src/schema.js';
import type { DataPage } from 'hyparquet/src/types.js';

/** Thrown for a column this reader does not take (nested, or its pages do not add up to the group's rows). */
export class IdColumnError extends Error {
  override name = 'IdColumnError';
}

const readerOf = (bytes: Uint8Array): DataReader => ({
  view: new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength),
  offset: 0,
});

/**
 * The values of the flat integer column `column` in row group `group` of `file`, as numbers:
 * one ranged read of the column chunk.
 *
 * @example
 * const jobs = await readIdColumn(file, metadata, metadata.row_groups[0]!, 'job_id', compressors);
 */
export async function readIdColumn(
  file: AsyncBuffer,
  metadata: FileMetaData,
  group: RowGroup,
  column: string,
  compressors?: Compressors,
): Promise<Float64Array> {
  const meta = group.columns.find((c) => c.meta_data?.path_in_schema.join('.') === column)?.meta_data;
  if (!meta) throw new IdColumnError(`no column ${column} in the row group`);
  const schemaPath = getTreePath(parquetSchema(metadata), meta.path_in_schema);
  if (!isFlatColumn(schemaPath)) throw new IdColumnError(`column ${column} is nested`);
  const element = schemaPath[schemaPath.length - 1]!.element;
  const decoder = {
    pathInSchema: meta.path_in_schema,
    type: meta.type,
    element,
    schemaPath,
    codec: meta.codec,
    parsers: DEFAULT_PARSERS,
    ...(compressors && { compressors }),
  };
  const maxDefinition = getMaxDefinitionLevel(schemaPath);
  // As hyparquet: some writers leave dictionary_page_offset 0 with the dictionary first.
  const start = Number(meta.dictionary_page_offset || meta.data_page_offset);
  const bytes = new Uint8Array(await file.slice(start, start + Number(meta.total_compressed_size)));
  const reader = readerOf(bytes);
  const rows = Number(group.num_rows);
  const out = new Float64Array(rows);
  let dictionary: Float64Array | undefined;
  let at = 0;
  while (at < rows && reader.offset < bytes.length) {
    const header = parquetHeader(reader);
    const body = bytes.subarray(reader.offset, reader.offset + header.compressed_page_size);
    reader.offset += header.compressed_page_size;
    const size = Number(header.uncompressed_page_size);
    let page: DataPage;
    let encoding: string;
    if (header.type === 'DICTIONARY_PAGE') {
      const plain = decompressPage(body, size, meta.codec, compressors);
      const count = header.dictionary_page_header!.num_values;
      const values = readPlain(readerOf(plain), meta.type, count, element.type_length);
      dictionary = Float64Array.from(values as ArrayLike<number | bigint>, Number);
      continue;
    } else if (header.type === 'DATA_PAGE') {
      const daph = header.data_page_header!;
      page = readDataPage(decompressPage(body, size, meta.codec, compressors), daph, decoder);
      encoding = daph.encoding;
    } else if (header.type === 'DATA_PAGE_V2') {
      page = readDataPageV2(body, header, decoder);
      encoding = header.data_page_header_v2!.encoding;
    } else continue; // an index page
    const dict = encoding.endsWith('_DICTIONARY') ? dictionary : undefined;
    const { dataPage } = page;
    const definitionLevels = page.definitionLevels ?? [];
    // hyparquet leaves the levels empty when the page has no null: then one value a row.
    const count = definitionLevels.length || dataPage.length;
    if (at + count > rows)
      throw new IdColumnError(`column ${column} holds more values than its ${rows} rows`);
    let v = 0;
    for (let i = 0; i < count; i++) {
      if (definitionLevels.length > 0 && definitionLevels[i] !== maxDefinition) out[at++] = 0;
      else {
        const value = dataPage[v++] as number | bigint;
        out[at++] = dict ? dict[value as number]! : Number(value);
      }
    }
  }
  if (at !== rows) throw new IdColumnError(`column ${column} holds ${at} values, not its ${rows} rows`);
  return out;
}

/**
 * Text in terminal columns: the width a string takes on screen (CJK and emoji take two columns,
 * combining marks and zero-width joiners none), padding and truncation by that width, so that
 * tables line up whatever the text.
 */
import stringWidth from 'string-width';

const graphemes = new Intl.Segmenter(undefined, { granularity: 'grapheme' });
const ELLIPSIS = '…';
/** Line breaks, tabs and other control characters would break a table's row: each shows as one space. */
const CONTROL = /\p{Cc}/gu;

/** Columns `text` takes on a terminal. */
export const displayWidth = (text: string): number => stringWidth(text);

/** `text` with spaces after it up to `width` columns (unchanged when it is as wide or wider). */
export const padEnd = (text: string, width: number): string =>
  text + ' '.repeat(Math.max(0, width - displayWidth(text)));

/** `text` as one line of a table cell: control characters become spaces. */
export const oneLine = (text: string): string => text.replace(CONTROL, ' ');

/**
 * `text` cut to at most `width` columns, ending in `…` when cut. Cuts between graphemes only:
 * a flag, a family emoji or a letter with its accents stays whole.
 */
export function truncate(text: string, width: number): string {
  if (displayWidth(text) <= width) return text;
  let kept = '';
  let used = 0;
  for (const { segment } of graphemes.segment(text)) {
    const w = displayWidth(segment);
    if (used + w > width - 1) break;
    kept += segment;
    used += w;
  }
  return kept + ELLIPSIS;
}

import type { PathSegment } from './field-path.js';

/** Deepest nesting of objects and arrays a job spec document may have. */
export const MAX_JSON_NESTING = 512;

/** Where and why a text is not JSON. */
export interface JsonSyntaxProblem {
  /** Offset of the offending character in the text, in UTF-16 code units. */
  readonly position: number;
  /** 1-based line of `position`. */
  readonly line: number;
  /** 1-based column of `position` within its line. */
  readonly column: number;
  /** What was expected or found, e.g. `expected ',' or '}'`. */
  readonly problem: string;
}

/** What a scan of a JSON text found. */
export interface JsonTextScan {
  /** The first syntax error, if any. */
  readonly syntaxError?: JsonSyntaxProblem;
  /** Paths of object keys that occur more than once in the same object (JSON.parse keeps the last). */
  readonly duplicateKeys: PathSegment[][];
}

class SyntaxStop {
  constructor(
    readonly position: number,
    readonly problem: string,
  ) {}
}

const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
const ESCAPE = /\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})/y;

/**
 * Checks a text against the JSON grammar (RFC 8259), locating the first error by line and
 * column (JSON.parse's messages do not always say where), and notes repeated keys.
 */
export function scanJsonText(text: string): JsonTextScan {
  const duplicateKeys: PathSegment[][] = [];
  const path: PathSegment[] = [];
  let pos = 0;

  const skipWhitespace = (): void => {
    while (pos < text.length) {
      const c = text.charCodeAt(pos);
      if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) return;
      pos++;
    }
  };
  const stop = (problem: string): never => {
    throw new SyntaxStop(pos, pos >= text.length ? `unexpected end of input, ${problem}` : problem);
  };
  const match = (pattern: RegExp): string | undefined => {
    pattern.lastIndex = pos;
    const found = pattern.exec(text);
    if (found === null || found[0] === '') return undefined;
    pos += found[0].length;
    return found[0];
  };
  const readString = (): string => {
    const start = pos;
    pos++;
    for (;;) {
      if (pos >= text.length) stop('unterminated string');
      const c = text.charCodeAt(pos);
      if (c === 0x22) break;
      if (c === 0x5c) {
        if (match(ESCAPE) === undefined) stop('invalid escape in string');
      } else if (c < 0x20) {
        stop('control character in string (escape it)');
      } else {
        pos++;
      }
    }
    pos++;
    return JSON.parse(text.slice(start, pos)) as string;
  };
  const readValue = (depth: number): void => {
    skipWhitespace();
    const c = text[pos];
    if (c === '{' || c === '[') {
      if (depth >= MAX_JSON_NESTING) stop(`nested deeper than ${MAX_JSON_NESTING} levels`);
      if (c === '{') readObject(depth + 1);
      else readArray(depth + 1);
    } else if (c === '"') {
      readString();
    } else if (text.startsWith('true', pos)) {
      pos += 4;
    } else if (text.startsWith('false', pos)) {
      pos += 5;
    } else if (text.startsWith('null', pos)) {
      pos += 4;
    } else if (match(NUMBER) === undefined) {
      stop('expected a value');
    }
  };
  const readObject = (depth: number): void => {
    pos++;
    skipWhitespace();
    if (text[pos] === '}') {
      pos++;
      return;
    }
    const keys = new Set<string>();
    for (;;) {
      skipWhitespace();
      if (text[pos] !== '"') stop('expected a double-quoted field name');
      const key = readString();
      if (keys.has(key)) duplicateKeys.push([...path, key]);
      keys.add(key);
      skipWhitespace();
      if (text[pos] !== ':') stop(`expected ':' after field name ${JSON.stringify(key)}`);
      pos++;
      path.push(key);
      readValue(depth);
      path.pop();
      skipWhitespace();
      if (text[pos] === ',') {
        pos++;
        continue;
      }
      if (text[pos] === '}') {
        pos++;
        return;
      }
      stop("expected ',' or '}'");
    }
  };
  const readArray = (depth: number): void => {
    pos++;
    skipWhitespace();
    if (text[pos] === ']') {
      pos++;
      return;
    }
    for (let index = 0; ; index++) {
      path.push(index);
      readValue(depth);
      path.pop();
      skipWhitespace();
      if (text[pos] === ',') {
        pos++;
        continue;
      }
      if (text[pos] === ']') {
        pos++;
        return;
      }
      stop("expected ',' or ']'");
    }
  };

  try {
    readValue(0);
    skipWhitespace();
    if (pos < text.length) stop('unexpected text after the document');
    return { duplicateKeys };
  } catch (error) {
    if (!(error instanceof SyntaxStop)) throw error;
    return { syntaxError: locate(text, error.position, error.problem), duplicateKeys };
  }
}

function locate(text: string, position: number, problem: string): JsonSyntaxProblem {
  let line = 1;
  let lineStart = 0;
  for (let i = text.indexOf('\n'); i !== -1 && i < position; i = text.indexOf('\n', i + 1)) {
    line++;
    lineStart = i + 1;
  }
  return { position, line, column: position - lineStart + 1, problem };
}

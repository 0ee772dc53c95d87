import fc from 'fast-check';

import { scanJsonText } from './json-text.js';

function parses(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

describe('json text scan', () => {
  it('json text scan - accepts what JSON.parse accepts', () => {
    fc.assert(
      fc.property(fc.json({ maxDepth: 6 }), (text) => {
        expect(scanJsonText(text).syntaxError).toBeUndefined();
      }),
      { numRuns: 500 },
    );
  });

  it('json text scan - refuses exactly what JSON.parse refuses', () => {
    const edited = fc
      .tuple(fc.json({ maxDepth: 4 }), fc.nat(), fc.nat({ max: 3 }), fc.string({ maxLength: 3, unit: 'binary' }))
      .map(([text, at, deleteCount, insert]) => {
        const i = at % (text.length + 1);
        return text.slice(0, i) + insert + text.slice(i + deleteCount);
      });
    fc.assert(
      fc.property(edited, (text) => {
        expect(scanJsonText(text).syntaxError === undefined).toBe(parses(text));
      }),
      { numRuns: 2000 },
    );
  });

  it('json text scan - locates the first error by line and column', () => {
    expect(scanJsonText('{\n  "a": 1,\n  "b": tru\n}').syntaxError).toEqual({
      position: 19,
      line: 3,
      column: 8,
      problem: 'expected a value',
    });
    expect(scanJsonText('"abc').syntaxError?.problem).toBe('unexpected end of input, unterminated string');
    expect(scanJsonText('"a\tb"').syntaxError?.problem).toBe('control character in string (escape it)');
    expect(scanJsonText('"\\x"').syntaxError?.problem).toBe('invalid escape in string');
    expect(scanJsonText('[01]').syntaxError?.problem).toBe("expected ',' or ']'");
  });

  it('json text scan - reports repeated keys with their paths, escapes decoded', () => {
    const scan = scanJsonText('{"a": [{"b": 1, "\\u0062": 2}], "a": 3, "c": {"a": 1}}');
    expect(scan.syntaxError).toBeUndefined();
    expect(scan.duplicateKeys).toEqual([['a', 0, 'b'], ['a']]);
  });
});

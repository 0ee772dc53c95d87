export function hello(): string { return 'hi'; }

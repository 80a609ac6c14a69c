// Which frames are the user's own code, for stack display (issue 4's definition, used by line attribution):
// a frame is user code unless its file is under site-packages/dist-packages, in the Python standard
// library, or a pseudo-file such as `<frozen runpy>` or `<string>`.
const STDLIB = /[\\/]lib[\\/]python\d+(\.\d+)?[\\/]/;
const PACKAGES = /[\\/](site|dist)-packages[\\/]/;

export function isUserFile(file: string): boolean {
  if (file === '' || file.startsWith('<')) return false;
  if (PACKAGES.test(file)) return false;
  return !STDLIB.test(file);
}

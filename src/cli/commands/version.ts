// The gpumem version, as `gpumem --version` and the MCP server's handshake give it (package.json's "version").
export const VERSION = '0.1.0';

// The test projects: every package, plugin and app that has tests.
export default ['packages/*', 'plugins/*', 'apps/*']

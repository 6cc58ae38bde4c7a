// A shared library that is not an energy plugin: no energyGetPluginInfo.
extern "C" int somethingElse() { return 1; }

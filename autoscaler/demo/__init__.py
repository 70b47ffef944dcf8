"""The local demo and the ModelMesh stand-in it runs (`fake_modelmesh`, reused by the tests)."""

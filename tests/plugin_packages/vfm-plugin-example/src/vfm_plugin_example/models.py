from vfm_models import hookimpl


@hookimpl
def vfm_models_register_families(register):
    # a lazy "module:attr" target: vfm plugins lists it without importing torch
    register("swiglu-dit", "vfm_plugin_example.family:FAMILY", description="DiT with RMSNorm and a SwiGLU MLP")

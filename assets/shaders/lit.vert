#version 330
// Meshes in their body frame; u_model places them in the world.
uniform mat4 u_proj_view;
uniform mat4 u_model;
uniform mat3 u_normal_matrix;

in vec3 in_position;
in vec3 in_normal;

out vec3 v_world;
out vec3 v_normal;
out vec3 v_local;

void main() {
    vec4 world = u_model * vec4(in_position, 1.0);
    v_world = world.xyz;
    v_normal = u_normal_matrix * in_normal;
    v_local = in_position;
    gl_Position = u_proj_view * world;
}

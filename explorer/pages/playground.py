import streamlit as st

st.title("Playground")
st.info("Coming soon.")
